"""operators/outcome.py's words in the task log: the failed containers' logs, the gate's verdict,
and an out-of-memory failure's advice, each checked line for line (no hook, no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.operators import memory_retry, outcome
from airflow_provider_tony.runtime.messages import Failure, GateResult, StateDocument, TaskSummary
from airflow_provider_tony.yarn.follower import JobResult
from airflow_provider_tony.yarn.logformat import log_groups

APP = "application_1_0001"


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(f"info: {msg % args}")

    def warning(self, msg: str, *args: Any) -> None:
        self.lines.append(f"warning: {msg % args}")

    def error(self, msg: str, *args: Any) -> None:
        self.lines.append(f"error: {msg % args}")


def task(state: str, container: str | None, host: str | None = "node1") -> TaskSummary:
    return TaskSummary(state=state, role="worker", index=0, host=host, container_id=container)


def test_the_failed_containers_logs_are_copied_and_one_that_cannot_be_fetched_is_said() -> None:
    doc = StateDocument(
        application_id=APP,
        app_state="FAILED",
        tasks={
            "worker:0": task("FAILED", "container_0"),  # its NodeManager is gone
            "worker:1": task("SUCCEEDED", "container_1"),  # not failed: not copied
            "worker:2": task("FAILED", None),  # never had a container
            "worker:3": task("LOST", "container_3", host=None),  # host unknown: asked with ""
        },
    )
    asked: list[tuple[str, str]] = []

    def container_logs(container: str, host: str) -> dict[str, str]:
        asked.append((container, host))
        if container == "container_0":
            raise OSError("node1 unreachable")
        return {"stderr": "Traceback\nValueError: bad\n"}

    log = Log()
    outcome.failed_logs(JobResult(APP, "FINISHED", "FAILED", "", None, doc), container_logs, log)
    assert asked == [("container_0", "node1"), ("container_3", "")]
    shown = [f"info: {line}" for line in log_groups("worker:3 stderr (container_3)", "Traceback\nValueError: bad\n")]
    assert log.lines == ["warning: could not fetch the logs of worker:0: node1 unreachable", *shown]
    assert any("ValueError: bad" in line for line in shown)


def test_the_gates_verdict_is_said_with_both_figures() -> None:
    figures = {"metric": "val_accuracy", "previous": 0.9}
    passed = GateResult(**figures, value=0.91, passed=True, model_dir="/m.versions/a", reason="better")
    log = Log()
    value = outcome.with_verdict({"application_id": APP}, passed, log)
    assert value["model_dir"] == "/m.versions/a"
    assert log.lines == ["info: quality gate passed (val_accuracy: this run 0.91, published model 0.9): better"]
    failed = GateResult(**figures, value=0.5, passed=False, model_dir="/m.rejected-a", reason="worse")
    log = Log()
    with pytest.raises(outcome.QualityGateFailed):
        outcome.with_verdict({"application_id": APP}, failed, log)
    assert log.lines == [
        "error: quality gate FAILED (val_accuracy: this run 0.5, published model 0.9): "
        "worse; the model stays at /m.rejected-a"
    ]


def test_an_out_of_memory_failure_keeps_its_message_and_adds_the_advice() -> None:
    failure = Failure(kind=memory_retry.OUT_OF_MEMORY, task_id="worker:0", requested_mib=2048, fix_field="x.memory")
    result = JobResult(APP, "FINISHED", "FAILED", "worker:0 killed for memory", None, None, failure)
    message = str(outcome.failed_try(result, None, fail_fast_on_permanent=False))
    header = f"TonY job {APP} FAILED: worker:0 killed for memory\nLogs: yarn logs -applicationId {APP}"
    assert message.startswith(header), message
    assert message.endswith("\n" + memory_retry.advice(None, "x.memory", 2048)), message
