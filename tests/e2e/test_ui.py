"""End to end as users run it: the trigger form in a real browser, the triggerer, the YARN pages."""

from __future__ import annotations

import contextlib
import html
import json
import re
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._util import rm_apps, serving, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e]
DAG = "tony_train_on_demand"
#: A run label a trigger-form user could type (issue 35): YAML, '..' and a template, all plain text to the job.
HOSTILE_LABEL = "../../x queue: production {files: {a: b}} {{ 7 * 7 }}"


def open_trigger_form(page: Any, url: str) -> Any:
    page.goto(f"{url}/dags/{DAG}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.locator("[role=dialog][data-state=open]")
    dialog.wait_for()
    return dialog


def runs(stack: Any) -> list[dict]:
    """The DAG's 100 newest runs, newest first.

    The PostgreSQL data outlives a session: in the API's default (ascending)
    order a new run falls outside the first 100 once that many exist.
    """
    return stack.api("GET", f"/dags/{DAG}/dagRuns?order_by=-id&limit=100")["dag_runs"]


def run_count(stack: Any) -> int:
    """How many runs the DAG has, all of them (the API's total, not a page)."""
    return stack.api("GET", f"/dags/{DAG}/dagRuns?limit=1")["total_entries"]


def wait_state(stack: Any, run_id: str, states: set[str], timeout: float) -> dict:
    return wait_until(
        lambda: (r := stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}"))["state"] in states and r,
        timeout,
        f"run {run_id} to reach {states}",
    )


def task(stack: Any, run_id: str) -> dict:
    return stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/train")


def test_trigger_form_trains_and_links_to_yarn(airflow_stack, page, shots_dir: Path, cluster) -> None:
    before = {r["dag_run_id"] for r in runs(airflow_stack)}
    dialog = open_trigger_form(page, airflow_stack.url)
    dialog.locator("input[name='element_workers']").fill("2")
    dialog.locator("input[name='element_epochs']").fill("2")
    dialog.locator("input[name='element_dataset_date']").fill("2026-11-05")
    dialog.locator("input[name='element_run_label']").fill(HOSTILE_LABEL)
    page.screenshot(path=str(shots_dir / "trigger-form.png"), full_page=True)
    dialog.get_by_role("button", name="Trigger").click()
    new = wait_until(lambda: [r for r in runs(airflow_stack) if r["dag_run_id"] not in before], 60, "the new run")
    run_id = new[0]["dag_run_id"]
    assert new[0]["conf"]["workers"] == 2 and new[0]["conf"]["dataset_date"] == "2026-11-05"
    # Deferrable on the real triggerer: while YARN runs the job, the task holds no worker slot.
    wait_until(lambda: task(airflow_stack, run_id)["state"] == "deferred", 300, "the task to be deferred")
    # The task instance's "TonY job" tab (the provider's plugin) while YARN runs the job: its AM's history.
    app_id = _assert_job_view(page, airflow_stack, run_id, "RUNNING", shots_dir / "job-view-running.png")
    final = wait_state(airflow_stack, run_id, {"success", "failed"}, 600)
    assert final["state"] == "success", task(airflow_stack, run_id)
    # Once the AM is gone, the same tab shows the history it left on HDFS.
    assert _assert_job_view(page, airflow_stack, run_id, "SUCCEEDED", shots_dir / "job-view-finished.png") == app_id
    _assert_only_airflow_frames_the_view(page, airflow_stack, run_id)
    _assert_label_changed_no_key_nor_folder(airflow_stack, cluster, run_id)
    page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}")
    page.get_by_text("success").first.wait_for()
    page.screenshot(path=str(shots_dir / "run-succeeded.png"), full_page=True)
    # The task's extra link, as a user clicks it on the task's page.
    page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}/tasks/train/details")
    # The extra link (the tab of the same name is the plugin's view, a link inside the UI).
    job_page = page.locator("a[target=_blank]", has_text="TonY job").get_attribute("href")
    assert job_page and job_page.endswith("/pages/tony/") and "/proxy/application_" in job_page, job_page
    link = page.get_by_role("link", name="YARN application")
    yarn_url = link.get_attribute("href")
    assert yarn_url and "/cluster/app/application_" in yarn_url, yarn_url
    if link.get_attribute("target") == "_blank":
        with page.context.expect_page() as opened:
            link.click()
        page = opened.value
        page.wait_for_load_state()
    else:
        link.click()
        page.wait_for_url(yarn_url)
    app_id = yarn_url.rsplit("/", 1)[1]
    assert app_id in page.content()
    page.get_by_text("SUCCEEDED").first.wait_for()
    page.screenshot(path=str(shots_dir / "yarn-application.png"), full_page=True)


def _view_url(stack: Any, run_id: str) -> str:
    """The view's own address, as the UI fills the plugin's href for an unmapped task instance."""
    return f"{stack.url}/tony/jobs/{DAG}/train/{{MAP_INDEX}}/{urllib.parse.quote(run_id, safe='')}"


def _assert_job_view(page: Any, stack: Any, run_id: str, state: str, shot: Path) -> str:
    """The "TonY job" tab of the task instance shows its application in ``state``; its application id."""
    url = _view_url(stack, run_id)
    # Until the AM serves its history the view says so (404): wait for the job's page, with the UI's cookie.
    wait_until(
        lambda: (r := page.request.get(url)).ok and re.search(rf'id="app-state"[^>]*>{state}<', r.text()),
        300,
        f"the job view to show {state}",
        interval=1.0,
    )
    page.goto(f"{stack.url}/dags/{DAG}/runs/{run_id}/tasks/train/plugin/tony-job")
    frame = page.frame_locator("iframe[title='TonY job']")
    frame.locator("#app-state").filter(has_text=state).wait_for(timeout=60_000)
    heading = frame.locator("h1").inner_text()
    app_id = next(word for word in heading.split() if word.startswith("application_"))
    page.screenshot(path=str(shot), full_page=True)
    entry = stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/train/xcomEntries/application_id")
    assert app_id == entry["value"], (heading, entry)
    return app_id


def _assert_only_airflow_frames_the_view(page: Any, stack: Any, run_id: str) -> None:
    """The view may be framed by the Airflow UI's origin alone (the UI's tab above is that origin
    framing it): its header says so, and Chromium refuses the view in a frame of another origin.

    The other origin is a page on the same host, another port: the same site, so the UI's cookie
    goes with the frame's request and the view answers with the job page, which Chromium then
    must not show."""
    url = _view_url(stack, run_id)
    policy = page.request.get(url).headers["content-security-policy"]
    assert policy.endswith(f"; frame-ancestors {stack.url}") and policy.count("frame-ancestors") == 1, policy
    with _page_framing(url) as other:
        with page.expect_console_message(lambda m: "frame-ancestors" in m.text, timeout=60_000) as refusal:
            page.goto(other)
        # Chromium's words for it: "Framing '<the other origin>' violates ... frame-ancestors <the UI's
        # origin>. The request has been blocked." (older ones said "Refused to frame").
        text = refusal.value.text
        assert stack.url in text and ("blocked" in text or "Refused to frame" in text), text
        assert page.frame_locator("#view").locator("#app-state").count() == 0, "the job page shown in another origin"


@contextlib.contextmanager
def _page_framing(url: str) -> Iterator[str]:
    """The address of a page, served on a port of its own, that frames ``url`` (another origin)."""
    body = f'<!doctype html><title>elsewhere</title><iframe id="view" src="{html.escape(url)}"></iframe>'.encode()
    with serving(body, "text/html; charset=utf-8") as port:
        yield f"http://127.0.0.1:{port}/"


def _assert_label_changed_no_key_nor_folder(stack: Any, cluster: Any, run_id: str) -> None:
    """The hostile label reached the script as the text it was (its own report of it), and the job
    kept its queue and its own checkpoint folder (issue 35, points 3 and 4)."""
    entry = stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/train/xcomEntries/return_value")
    result = json.loads(entry["value"]) if isinstance(entry["value"], str) else entry["value"]
    assert result["metrics"]["partition"] == f"2026-11-05/{HOSTILE_LABEL}", result["metrics"]
    folder = result["checkpoint_dir"]
    assert f"/checkpoints/{DAG}/train/" in folder and not {".", ".."} & set(folder.split("/")), folder
    app = [a for a in rm_apps(cluster.rm_url, tag=f"tony-dag:{DAG}") if a["id"] == result["application_id"]]
    assert app and app[0]["queue"] in ("default", "root.default"), app


@pytest.mark.parametrize("typed, clamped", [("0", "1"), ("1000", "4")])
def test_form_refuses_out_of_range_workers(airflow_stack, page, shots_dir: Path, typed: str, clamped: str) -> None:
    """Airflow 3.3's form clamps a number to the schema's bounds as the field loses focus (its own
    behaviour; no free-text error), and the API behind it rejects an out-of-range value with the
    schema's message: either way no run with that value is ever created."""
    before = run_count(airflow_stack)
    dialog = open_trigger_form(page, airflow_stack.url)
    field = dialog.locator("input[name='element_workers']")
    field.fill(typed)
    dialog.locator("input[name='element_epochs']").click()  # leave the field
    wait_until(lambda: field.input_value() == clamped, 10, f"the form to bring {typed} back to {clamped}")
    page.screenshot(path=str(shots_dir / f"form-refuses-{typed}.png"), full_page=True)
    with pytest.raises(urllib.error.HTTPError) as err:
        airflow_stack.api("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None, "conf": {"workers": int(typed)}})
    detail = err.value.read().decode()
    assert err.value.code == 400 and "Invalid input for param workers" in detail, detail
    assert run_count(airflow_stack) == before, "a run was created"
    assert all(1 <= r["conf"].get("workers", 2) <= 4 for r in runs(airflow_stack))


def test_marking_a_slow_run_failed_kills_its_application(airflow_stack, page, shots_dir: Path, cluster) -> None:
    run = airflow_stack.api(
        "POST",
        f"/dags/{DAG}/dagRuns",
        {
            "logical_date": None,
            "conf": {
                # 20 x 1000 steps: minutes of training, so the run is still going when it is marked failed.
                "workers": 2,
                "epochs": 20,
                "steps_per_epoch": 1000,
                "dataset_date": "2026-11-06",
                "run_label": "slow",
            },
        },
    )
    run_id = run["dag_run_id"]
    tag = f"tony-run:{run_id.lower()}"

    def running_app() -> list[dict]:
        return [
            a
            for a in rm_apps(cluster.rm_url, states="RUNNING", tag="tony-dag:" + DAG)
            if tag in a["applicationTags"].split(",")
        ]

    app = wait_until(running_app, 300, "the training application to run")[0]
    wait_until(lambda: task(airflow_stack, run_id)["state"] == "deferred", 120, "the task to be deferred")
    # Mark it failed the way a user does: the task's page, "Mark Task Instance as...", Failed, Confirm.
    page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}/tasks/train")
    page.get_by_role("button", name="Mark Task Instance as...").click()
    page.get_by_role("menuitem", name="Failed").click()
    dialog = page.locator("[role=dialog][data-state=open]")
    dialog.get_by_role("button", name="Confirm").click()
    marked = time.monotonic()
    wait_until(lambda: task(airflow_stack, run_id)["state"] == "failed", 120, "the task to be failed")
    # The timeouts bound a hang; how long the kill took is reported, not asserted.
    final = wait_until(
        lambda: (
            (a := [x for x in rm_apps(cluster.rm_url, tag="tony-dag:" + DAG) if x["id"] == app["id"]])
            and a[0]["state"] in ("KILLED", "FINISHED", "FAILED")
            and a[0]
        ),
        300,
        f"{app['id']} to end",
    )
    seconds = time.monotonic() - marked
    print(f"YARN application {final['state']} {seconds:.1f}s after the task was marked failed")
    page.screenshot(path=str(shots_dir / "marked-failed.png"), full_page=True)
    assert final["state"] == "KILLED", final
