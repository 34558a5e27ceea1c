"""The job's page and state over HTTP, on the real cluster, and its history on HDFS after the end.

A real application reports a falling loss step by step; the test reads its
state document and metric history through the ResourceManager's web proxy
(the same URLs the operator and the trigger follow), looks at the page in
Chromium (a screenshot under test-artifacts/screenshots), then checks that
the final history is on HDFS where ``tony status`` finds it, and that
``tony status --html`` renders the page from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.messages import JobHistory
from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import wait_until
from tests.integration._job_page import CHROMIUM, CURVE, SHOTS

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]


def _json(url: str) -> Any:
    try:
        resp = httpx.get(url, timeout=10, follow_redirects=True)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200 or "json" not in resp.headers.get("content-type", ""):
        return None
    return resp.json() or None


def test_the_job_page_state_and_history_through_the_proxy_then_on_hdfs(
    tony_client, python_exe: str, app_tag: str
) -> None:
    # Reports four times as often as the heartbeat: every one of them must reach the history.
    steps = 80
    ckpt = f"{tony_client.base_path}/pytest/{app_tag}/ckpt"
    spec = JobSpec.from_dict(
        {
            "name": "pytest-job-page",
            "python": {"interpreter": python_exe},
            "roles": {"worker": {"instances": 2, "memory": "256 MiB", "script": CURVE, "args": [str(steps), "0.25"]}},
            "heartbeat_interval": 1,
            "heartbeat_timeout": 20,
            "registration_timeout": 120,
            "checkpoint": {"dir": ckpt},
        }
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    page_url = tony_client.job_page_url(app_id)
    assert page_url == f"{tony_client.rm_url}/proxy/{app_id}/pages/tony/"

    # While it runs: the state document and the metric history, through the RM's proxy.
    history = wait_until(
        lambda: (h := _json(page_url + "history")) and len((h.get("metrics") or {}).get("worker:0") or []) >= 3 and h,
        timeout=240,
        what="three progress reports of worker:0 in the history served through the proxy",
    )
    doc = _json(page_url + "state")
    assert doc["application_id"] == app_id and doc["tasks"]["worker:0"]["host"]
    losses = [p["metrics"]["loss"] for p in history["metrics"]["worker:0"]]
    assert losses == sorted(losses, reverse=True) and len(set(losses)) == len(losses)

    fetched = time.monotonic()
    html = httpx.get(page_url, timeout=10, follow_redirects=True)
    fetch_s = time.monotonic() - fetched
    assert html.status_code == 200 and "text/html" in html.headers["content-type"]
    assert 'data-metric="loss"' in html.text and 'data-task="worker:1"' in html.text
    assert "/node/containerlogs/" in html.text
    started = time.monotonic()
    _screenshot(page_url, SHOTS / "job-page.png")
    print(
        f"\njob page {page_url}: {len(html.content)} bytes, fetched in {fetch_s * 1000:.0f} ms, "
        f"Chromium start+load+screenshot "
        f"{time.monotonic() - started:.1f}s, screenshot {SHOTS / 'job-page.png'}"
    )

    # Following over HTTP to the end, as the operator does (no skein driver).
    result = tony_client.wait(app_id, poll_interval=0.5, emit=lambda line: print(line, flush=True))
    assert result.succeeded, result.diagnostics
    assert result.am_state is not None and result.am_state.final
    assert getattr(tony_client, "_skein", None) is None, "following must not start the skein driver"

    # After the end: the final history on HDFS, beside the checkpoints and in the history folder.
    stored = tony_client.stored_history(app_id)
    assert stored is not None and stored.state is not None and stored.state.app_state == "SUCCEEDED"
    # Every point reported, not only those current at a heartbeat. worker:1 may be stopped when
    # worker:0 decides (its last beat or two then never arrive): no gap, whatever it reached.
    assert [p.step for p in stored.metrics["worker:0"]] == list(range(1, steps + 1))
    other = [p.step for p in stored.metrics["worker:1"]]
    assert other == list(range(1, len(other) + 1)) and len(other) >= steps - 8, other
    # Each task's resource use, sampled by its executor, beside its role's request.
    used = stored.state.tasks["worker:0"].usage
    assert used is not None and used.samples >= 3, used
    assert 10 << 20 < (used.peak_rss_bytes or 0) < 256 << 20, used
    assert used.requested_memory_mib == 256 and used.requested_vcores == 1 and used.cpu_seconds
    assert used.peak_gpu_util is None, "a role without GPUs asks nvidia-smi nothing"
    assert any("under half of the 256 MiB requested" in note for note in used.notes), used.notes
    hdfs = tony_client.hdfs()
    beside = f"{ckpt}/_tony/{app_id}.json"
    with hdfs.read(beside) as reader:
        assert JobHistory.from_json(reader.read()).state.application_id == app_id

    out = _tony("status", "--html", app_id)
    assert out.startswith("<!doctype html>") and app_id in out and 'data-metric="accuracy"' in out
    # An id YARN never knew (as after it forgot one): the stored history answers.
    forgotten = app_id.rsplit("_", 1)[0] + "_9999"
    hdfs.write(f"{tony_client.history_dir}/{forgotten}.json", data=stored.to_json(), overwrite=True)
    try:
        status = json.loads(_tony("status", forgotten))
    finally:
        hdfs.delete(f"{tony_client.history_dir}/{forgotten}.json")
    assert status["application_id"] == app_id and status["app_state"] == "SUCCEEDED"


def _tony(*args: str) -> str:
    """The ``tony`` command's output, run as a user would (its own process, this checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_tony.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=True,
    ).stdout


def _screenshot(url: str, path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(url)
            page.wait_for_selector('div.chart[data-metric="loss"] svg polyline', timeout=30_000)
            assert page.locator("#tasks tr[data-task]").count() == 2
            # The task table fits the page's width: nothing cut off or scrolled out of view.
            fits = page.evaluate(
                "() => { const t = document.querySelector('#tasks'); const w = t.parentElement;"
                " return [t.getBoundingClientRect().right, document.documentElement.clientWidth,"
                " w.scrollWidth, w.clientWidth]; }"
            )
            assert fits[0] <= fits[1] and fits[2] <= fits[3], fits
            page.screenshot(path=str(path), full_page=True)
        finally:
            browser.close()
