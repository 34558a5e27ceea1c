"""The nightly retrain's human-in-the-loop approval in the real Airflow stack.

A model that scores below the published one but within the gate's tolerance is neither
published nor refused: the gate holds it as a candidate and ``approve_model`` (Airflow's
``ApprovalOperator``) asks a person. The test makes that night happen on purpose: the
published record says 1.0 and the run's ``tolerance`` param is 50%, so tonight's model (a
real training run on a real partition) falls within it. A person approves in the UI
(Chromium); ``publish_approved`` publishes that model and the record names it.

The same run, started by the scheduler (not ``airflow dags test``), carries the DAG's deadline
alert: 4 hours after it was queued while it waits, none left once it is done in time.
"""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests._util import wait_until
from tests.e2e._support import stack_home
from tests.integration._nightly import write_digits_partition

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e]
DAG = "tony_nightly_retrain"
DAY = "2026-10-20"
ENDED = ("success", "failed")


def deadlines(stack: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's deadlines, as the UI's Deadlines view reads them (its own route, beside /api/v2)."""
    req = urllib.request.Request(
        f"{stack.url}/ui/dags/{DAG}/dagRuns/{run_id}/deadlines", headers={"Authorization": f"Bearer {stack.token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return list(json.load(resp)["deadlines"])


def scheduler_heard_the_deferral(run_id: str) -> bool:
    """Whether the scheduler has drained the executor's word on ``approve_model``'s first process,
    which ended by deferring to wait for a person (it logs "TaskInstance Finished" for it).

    A person answers hours later; the test answers at once, and Airflow 3.3 fails the resumed task
    if that stale "success" is drained only after the answer has set it running again
    (apache/airflow#72716; seen in CI with the scheduler seconds behind under load).
    """
    log = stack_home() / "logs" / "scheduler.log"
    needle = f"TaskInstance Finished: dag_id={DAG}, task_id=approve_model, run_id={run_id},"
    return log.exists() and needle in log.read_text(errors="replace")


def ti(stack: Any, run_id: str, task_id: str) -> dict[str, Any]:
    return stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}")


def test_a_model_within_the_tolerance_is_published_only_once_a_person_approves(
    airflow_stack, page, shots_dir: Path, cluster
) -> None:
    from hdfs import InsecureClient

    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    base = f"/user/{cluster.user}/tony"
    write_digits_partition(cluster, base, DAY)
    record = f"{base}/models/digits/published.json"
    # The published model, as far as the gate knows: a figure no night reaches.
    yardstick = {"application_id": "application_1_0001", "step": 1, "metrics": {"val_accuracy": 1.0}}
    hdfs.write(record, data=json.dumps({"format": 1, **yardstick, "model_dir": f"{base}/models/x"}), overwrite=True)
    # A logical date of its own on DAY (one run per logical date; 01:00-20:59 UTC is DAY in Amsterdam too).
    now = time.gmtime()
    when = f"{DAY}T{1 + now.tm_hour % 20:02d}:{now.tm_min:02d}:{now.tm_sec:02d}Z"
    run_id = airflow_stack.api(
        "POST", f"/dags/{DAG}/dagRuns", {"logical_date": when, "conf": {"tolerance": "50%", "warm_start": False}}
    )["dag_run_id"]
    wait_until(
        lambda: ti(airflow_stack, run_id, "approve_model")["state"] in ("deferred", "awaiting_input"),
        600,
        "the approval to wait for a person",
    )
    (deadline,) = deadlines(airflow_stack, run_id)
    queued = datetime.fromisoformat(airflow_stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}")["queued_at"])
    assert datetime.fromisoformat(deadline["deadline_time"]) - queued == timedelta(hours=4), deadline
    assert not deadline["missed"]
    held = ti(airflow_stack, run_id, "train")
    assert held["state"] == "success", held
    verdict = airflow_stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/train/xcomEntries/quality_gate")[
        "value"
    ]
    verdict = json.loads(verdict) if isinstance(verdict, str) else verdict
    assert verdict["awaiting_approval"] and not verdict["passed"] and ".candidate-" in verdict["model_dir"], verdict
    with hdfs.read(record) as reader:
        assert json.loads(reader.read())["application_id"] == yardstick["application_id"], "nothing published yet"

    page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}/tasks/approve_model/required_actions")
    page.get_by_text("within the tolerance").first.wait_for()
    page.screenshot(path=str(shots_dir / "approval-asked.png"), full_page=True)
    wait_until(lambda: scheduler_heard_the_deferral(run_id), 120, "the scheduler to hear approve_model's first exit")
    page.get_by_role("button", name="Approve").click()
    final = wait_until(
        lambda: (r := airflow_stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}"))["state"] in ENDED and r,
        300,
        f"the run {run_id} to end after the approval",
    )
    page.screenshot(path=str(shots_dir / "approval-given.png"), full_page=True)
    assert final["state"] == "success", [
        ti(airflow_stack, run_id, t)["state"] for t in ("approve_model", "publish_approved")
    ]
    assert deadlines(airflow_stack, run_id) == [], "a run done in time leaves no deadline to miss"
    published = airflow_stack.api(
        "GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/publish_approved/xcomEntries/return_value"
    )["value"]
    published = json.loads(published) if isinstance(published, str) else published
    with hdfs.read(record) as reader:
        now = json.loads(reader.read())
    assert now["application_id"] == published["application_id"] and ".versions/" in now["model_dir"], now
    assert published["quality_gate"]["passed"] and published["quality_gate"]["within_tolerance"]
