"""The operator's outcome as a user reads it: the failure message and the XCom's size cap.

``_finish`` and ``_xcom_result`` are called directly with made-up results (no
hook, no cluster): what they write is the task log, the exception Airflow
shows, and the XCom downstream tasks read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_provider_tony.operators.tony import (
    MAX_STATUS_CHARS,
    XCOM_MAX_BYTES,
    XCOM_SUMMARY_DIAGNOSTICS,
    XCOM_SUMMARY_EVENTS,
    XCOM_SUMMARY_RESTARTS,
    TonyOperator,
)
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.yarn.follower import JobResult
from airflow_provider_tony.yarn.logformat import SHOWN_MAX
from tests.unit.support.tracker import make_spec

APP = "application_1_0001"
#: Longer than a log line's default cut, shorter than the diagnostics cap: shown whole.
LONG_DIAGNOSTICS = "worker:0 exited with code 1; " + "d" * (SHOWN_MAX * 3)


def operator() -> TonyOperator:
    op = TonyOperator(task_id="t", job={"roles": {"worker": {"instances": 2, "command": ["true"]}}})
    op._spec = make_spec({"worker": 2})  # what execute builds before following: worker:0 decides
    return op


def logged(op: TonyOperator, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operator's log lines, formatted as the task log shows them."""
    lines: list[str] = []
    for level in ("info", "warning", "error"):
        monkeypatch.setattr(op.log, level, lambda msg, *args: lines.append(msg % args))
    return lines


def result(status: str, diagnostics: str, doc: StateDocument | None = None) -> JobResult:
    return JobResult(APP, "FINISHED", status, diagnostics, "http://rm/app", doc)


def test_a_failures_message_shows_the_whole_diagnostics_and_a_cut_status(monkeypatch: pytest.MonkeyPatch) -> None:
    op = operator()
    lines = logged(op, monkeypatch)
    status = "FAILED" + "X" * 100  # a forged status: cut, not shown whole
    with pytest.raises(AirflowException) as info:
        op._finish(result(status, LONG_DIAGNOSTICS))
    message = str(info.value)
    assert LONG_DIAGNOSTICS in message
    assert f"{APP} {status[:MAX_STATUS_CHARS]}…:" in message and status[: MAX_STATUS_CHARS + 1] not in message
    text = "\n".join(lines)
    assert LONG_DIAGNOSTICS in text
    assert status[:MAX_STATUS_CHARS] in text and status[: MAX_STATUS_CHARS + 1] not in text


def test_a_success_logs_its_whole_diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    op = operator()
    lines = logged(op, monkeypatch)
    op._finish(result("SUCCEEDED", LONG_DIAGNOSTICS))
    assert f"{APP} SUCCEEDED: {LONG_DIAGNOSTICS}" in lines


def _doc(tasks: int, events: int, restarts: int, metrics: int = 1, metric_chars: int = 10) -> StateDocument:
    return StateDocument.from_dict(
        {
            "application_id": APP,
            "tasks": {
                f"worker:{i}": {
                    "state": "SUCCEEDED" if i % 3 else "KILLED",
                    "host": f"node{i}",
                    "progress": {"step": 7, "metrics": {f"m{m}": "x" * metric_chars for m in range(metrics)}}
                    if i == 0
                    else None,
                }
                for i in range(tasks)
            },
            "events": [f"checkpoint step {i} uploaded to /ckpt/ckpt-{i}" for i in range(events)],
            "artefacts": [f"checkpoint step {i} uploaded to /ckpt/ckpt-{i}" for i in range(events)],
            "restarts": [{"attempt": i + 1, "failed_task": "worker:1", "cause": "lost"} for i in range(restarts)],
        }
    )


def test_a_result_exactly_at_the_cap_is_kept_whole() -> None:
    op = operator()
    doc = _doc(tasks=3, events=2, restarts=1)
    size = len(json.dumps(op._xcom_result(result("SUCCEEDED", "", doc)), default=str))
    value = op._xcom_result(result("SUCCEEDED", "d" * (XCOM_MAX_BYTES - size), doc))
    assert len(json.dumps(value, default=str)) == XCOM_MAX_BYTES
    assert set(value["tasks"]) == {"worker:0", "worker:1", "worker:2"}, "not summarised"


def test_past_the_cap_tasks_become_counts_and_lists_keep_their_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _doc(tasks=600, events=200, restarts=40)
    op = operator()
    lines = logged(op, monkeypatch)
    value: dict[str, Any] = op._xcom_result(result("FAILED", "e" * 20000, doc))
    assert len(json.dumps(value, default=str)) <= XCOM_MAX_BYTES
    assert value["tasks"] == {"count": 600, "by_state": {"KILLED": 200, "SUCCEEDED": 400}}
    events = doc.artefact_events()
    assert len(events) > XCOM_SUMMARY_EVENTS and value["events"] == events[-XCOM_SUMMARY_EVENTS:]
    assert [r["attempt"] for r in value["restarts"]] == list(range(41 - XCOM_SUMMARY_RESTARTS, 41))
    assert value["diagnostics"] == "e" * XCOM_SUMMARY_DIAGNOSTICS
    assert value["metrics"] == {"m0": "x" * 10} and value["step"] == 7, "small metrics are kept"
    assert "the job's result was too large for an XCom: per-task details are summarised" in lines


def test_when_the_summary_is_still_too_large_metrics_and_lists_go() -> None:
    # 64 metrics of 1000 characters: the most a task's progress may carry, past the cap on its own
    doc = _doc(tasks=2, events=30, restarts=12, metrics=64, metric_chars=1000)
    value = operator()._xcom_result(result("SUCCEEDED", "", doc))
    assert len(json.dumps(value, default=str)) <= XCOM_MAX_BYTES
    assert (value["metrics"], value["events"], value["restarts"]) == ({}, [], [])
    assert value["tasks"]["count"] == 2 and value["step"] == 7
