"""The words of a task log: summary per poll, task state changes, folded log tails."""

from __future__ import annotations

from airflow_provider_tony.runtime.messages import Progress, StateDocument, TaskSummary
from airflow_provider_tony.yarn.logformat import decider_of, log_groups, summary_line, task_state_lines


def document(**tasks: TaskSummary) -> StateDocument:
    return StateDocument(
        application_id="app", app_state="RUNNING", seq=1, tasks={k.replace("_", ":"): v for k, v in tasks.items()}
    )


def test_summary_counts_tasks_by_state_and_shows_the_deciders_progress() -> None:
    doc = document(
        chief_0=TaskSummary(
            state="RUNNING", role="chief", progress=Progress(step=40, epoch=2, metrics={"loss": 0.312345, "n": 3})
        ),
        worker_0=TaskSummary(
            state="RUNNING", role="worker", progress=Progress(step=99, epoch=9, metrics={"loss": 9.0})
        ),
        worker_1=TaskSummary(state="PENDING", role="worker"),
        ps_0=TaskSummary(state="RUNNING", role="ps", tracked=False),
    )
    assert decider_of(doc) == "chief:0"
    assert summary_line(doc) == "RUNNING: 1 PENDING, 3 RUNNING | chief:0 step 40 epoch 2 (loss=0.3123, n=3)"


def test_summary_before_any_progress_or_task() -> None:
    assert summary_line(document(worker_0=TaskSummary(state="PENDING"))) == "RUNNING: 1 PENDING"
    assert summary_line(document()) == "RUNNING: no tasks yet"


def test_a_task_line_only_when_its_state_changes() -> None:
    seen: dict[str, str] = {}
    running = document(worker_0=TaskSummary(state="RUNNING", host="node1", port=4000))
    assert task_state_lines(running, seen) == ["worker:0 RUNNING on node1:4000"]
    assert task_state_lines(running, seen) == []
    failed = document(worker_0=TaskSummary(state="FAILED", host="node1", exit_code=3))
    assert task_state_lines(failed, seen) == ["worker:0 RUNNING -> FAILED on node1 (exit code 3)"]


def test_log_tails_are_folded_in_a_group() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    lines = log_groups("worker:1 worker.log (container_1)", text, tail=3)
    assert lines == [
        "::group::worker:1 worker.log (container_1) (last 3 lines)",
        "line 97",
        "line 98",
        "line 99",
        "::endgroup::",
    ]
