"""The task page's links work while the job runs, deferred and polling alike.

Airflow 3.3 renders an extra link from the XCom under the link's ``xcom_key``;
the operator writes the YARN page's URL as soon as it submitted and the
TensorBoard URL (through the ResourceManager's proxy) once that role serves,
so a user can open both from the task page before the task ends. Both runs
are then marked failed, which kills their applications.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._util import rm_apps, wait_until

# whole_cluster: the links are opened while a two-worker job with TensorBoard runs; with the other
# lanes' jobs on the shared NodeManager its second worker waited past the AM's registration timeout
# (CI: "worker:1 never registered"), and TensorBoard, waiting for the gang, never served.
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e, pytest.mark.whole_cluster]
ACTIVE = {"running", "deferred", "queued", "scheduled", "up_for_reschedule"}


def task(stack: Any, dag: str, run_id: str) -> dict:
    return stack.api("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances/train")


def links(stack: Any, dag: str, run_id: str) -> dict[str, str]:
    return stack.api("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances/train/links")["extra_links"]


def open_in_browser(page: Any, stack: Any, dag: str, run_id: str, name: str, load_timeout_ms: float = 30_000) -> Any:
    """Click the task page's link ``name``; the page it opened, once loaded."""
    page.goto(f"{stack.url}/dags/{dag}/runs/{run_id}/tasks/train/details")
    link = page.get_by_role("link", name=name)
    link.wait_for(timeout=60_000)
    if link.get_attribute("target") == "_blank":
        with page.context.expect_page() as opened:
            link.click()
        target = opened.value
        target.wait_for_load_state(timeout=load_timeout_ms)
        return target
    link.click()
    page.wait_for_load_state(timeout=load_timeout_ms)
    return page


@pytest.mark.parametrize(
    "dag, mode", [("tony_train_on_demand", "deferred"), ("tony_train_on_demand_in_worker", "running")]
)
def test_yarn_and_tensorboard_links_open_while_the_task_runs(
    airflow_stack, page, shots_dir: Path, cluster, dag: str, mode: str
) -> None:
    started = time.monotonic()
    run = airflow_stack.api(
        "POST",
        f"/dags/{dag}/dagRuns",
        {
            "logical_date": None,
            "conf": {
                # Minutes of training: the run is still going while the links are opened.
                "workers": 2,
                "epochs": 20,
                "steps_per_epoch": 1000,
                "tensorboard": True,
                "run_label": "links",
            },
        },
    )
    run_id = run["dag_run_id"]
    tag = f"tony-run:{run_id.lower()}"
    try:
        wait_until(lambda: task(airflow_stack, dag, run_id)["state"] == mode, 300, f"the task to be {mode}")
        yarn_url = wait_until(
            lambda: links(airflow_stack, dag, run_id).get("YARN application"), 120, "the YARN link while the task runs"
        )
        app_id = yarn_url.rsplit("/", 1)[1]
        opened = open_in_browser(page, airflow_stack, dag, run_id, "YARN application")
        assert app_id in opened.content()
        opened.screenshot(path=str(shots_dir / f"live-yarn-{mode}.png"), full_page=True)
        yarn_s = time.monotonic() - started

        tb_url = wait_until(
            lambda: links(airflow_stack, dag, run_id).get("TensorBoard"),
            300,
            "the TensorBoard link while the task runs",
        )
        assert tb_url.startswith(f"{cluster.rm_url}/proxy/{app_id}/"), tb_url

        def tensorboard_serves() -> bool:
            # Linked from submit on (a deferred task cannot write XCom later): it answers once the role
            # serves. Asked over plain HTTP: reloading a browser tab every look restarts TensorBoard's
            # multi-megabyte page, which on a loaded machine may never finish loading within a look.
            try:
                answer = httpx.get(tb_url, timeout=30)
            except httpx.HTTPError:
                return False
            return answer.status_code == 200 and "<title>TensorBoard</title>" in answer.text

        wait_until(tensorboard_serves, 300, "TensorBoard to answer through the ResourceManager's proxy")
        seen: list[str] = []

        def link_opens_tensorboard() -> Any:
            # Clicked once TensorBoard serves, and clicked again (not the tab reloaded) while it shows
            # something else: a tab the proxy sent elsewhere at a loaded moment stays there on reload.
            tab = open_in_browser(page, airflow_stack, dag, run_id, "TensorBoard", load_timeout_ms=180_000)
            if tab.title() == "TensorBoard":
                return tab
            seen.append(f"{tab.title()!r} at {tab.url}")
            if tab is not page:
                tab.close()
            return None

        try:
            opened = wait_until(link_opens_tensorboard, 300, "the TensorBoard link to open TensorBoard", interval=2.0)
        except AssertionError as failed:
            raise AssertionError(f"{failed}; the tab showed: {seen[-3:]}") from None
        opened.screenshot(path=str(shots_dir / f"live-tensorboard-{mode}.png"), full_page=True)
        assert task(airflow_stack, dag, run_id)["state"] == mode, "both links were opened while the task ran"
        print(
            f"{mode}: YARN link opened {yarn_s:.1f}s and TensorBoard {time.monotonic() - started:.1f}s "
            "after the trigger, while the task ran"
        )
    finally:
        airflow_stack.api("PATCH", f"/dags/{dag}/dagRuns/{run_id}/taskInstances/train", {"new_state": "failed"})
        wait_until(
            lambda: (
                not [
                    a
                    for a in rm_apps(cluster.rm_url, states="ACCEPTED,RUNNING", tag="tony-dag:" + dag)
                    if tag in a["applicationTags"].split(",")
                ]
            ),
            300,
            "the application to be killed",
        )
