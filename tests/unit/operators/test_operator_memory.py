"""The operator and a container killed for its memory: final by default, retried larger with ``memory_retry``.

Against the fake hook of ``test_operator``: the previous try's failure comes
from the AM's stored history of this task run's newest failed application.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_tony.operators.tony import XCOM_FAILURE, TonyOperator
from airflow_provider_tony.runtime.messages import Failure, JobHistory, StateDocument
from airflow_provider_tony.yarn.follower import AppReport, JobResult
from tests.unit.support.operator import APP, URL, FakeHook, FakeTaskStateStore, FakeTI

OOM = Failure(
    kind="out_of_memory",
    task_id="worker:1",
    exit_code=143,
    message="worker:1 out of memory",
    peak_mib=1400,
    requested_mib=1024,
    fix_field="roles.worker.memory",
)


def oom_result(requested_mib: int = 1024) -> JobResult:
    failure = Failure.from_dict({**OOM.to_dict(), "requested_mib": requested_mib})
    return JobResult(APP, "FINISHED", "FAILED", "worker:1 out of memory", URL, None, failure=failure)


def memory_operator(result: JobResult, try_number: int = 1, **job: Any) -> tuple[TonyOperator, FakeHook, dict]:
    spec = {"roles": {"worker": {"instances": 2, "memory": "1 GiB", "command": ["true"]}}, **job}
    op = TonyOperator(task_id="train", job=spec, deferrable=False)
    hook = FakeHook(result)
    op._hook = hook  # type: ignore[assignment]
    ti = FakeTI()
    ti.try_number = try_number
    return op, hook, {"ti": ti, "task_state_store": FakeTaskStateStore()}


RETRY = {"memory_retry": {"factor": 2, "max": "2 GiB"}}


def test_a_memory_kill_fails_the_task_without_retries_and_pushes_the_failure() -> None:
    op, _hook, ctx = memory_operator(oom_result())
    op._spec = op.build_spec(ctx)
    with pytest.raises(AirflowFailException) as info:
        op._finish(oom_result(), ctx)
    assert "Out of memory: raise roles.worker.memory (it asked for 1024 MiB), or set memory_retry" in str(info.value)
    pushed = ctx["ti"].xcom[XCOM_FAILURE]
    assert (pushed["kind"], pushed["task_id"], pushed["peak_mib"]) == ("out_of_memory", "worker:1", 1400)
    assert (pushed["requested_mib"], pushed["fix_field"]) == (1024, "roles.worker.memory")


def test_with_memory_retry_the_kill_is_retried_until_the_request_reaches_max() -> None:
    op, _hook, ctx = memory_operator(oom_result(), **RETRY)
    op._spec = op.build_spec(ctx)
    with pytest.raises(AirflowException) as info:
        op._finish(oom_result(1024), ctx)
    assert not isinstance(info.value, AirflowFailException)
    assert "the next try asks for roles.worker.memory = 2048 MiB" in str(info.value)
    with pytest.raises(AirflowFailException, match=r"at memory_retry.max \(2048 MiB\): not retried"):
        op._finish(oom_result(2048), ctx)


def _previous_try(hook: FakeHook, ctx: dict, failure: Failure, op: TonyOperator) -> None:
    """The task run's first application, failed, with the AM's history on HDFS."""
    hook.apps.insert(0, AppReport(app_id=APP, state="FINISHED", final_status="FAILED", tags=op.identity_tags(ctx)))
    hook.client.stored = JobHistory(state=StateDocument(application_id=APP, app_state="FAILED", failure=failure))


def test_the_next_try_asks_for_the_grown_request() -> None:
    op, hook, ctx = memory_operator(oom_result(), try_number=2, **RETRY)
    _previous_try(hook, ctx, OOM, op)
    assert op.build_spec(ctx).roles["worker"].memory == 2048
    # The first try, or a previous failure of another kind, submits the job as written.
    first, first_hook, first_ctx = memory_operator(oom_result(), try_number=1, **RETRY)
    _previous_try(first_hook, first_ctx, OOM, first)
    assert first.build_spec(first_ctx).roles["worker"].memory == 1024
    lost, lost_hook, lost_ctx = memory_operator(oom_result(), try_number=2, **RETRY)
    _previous_try(lost_hook, lost_ctx, Failure(kind="lost", retryable=True, task_id="worker:1"), lost)
    assert lost.build_spec(lost_ctx).roles["worker"].memory == 1024


def test_without_memory_retry_the_next_try_is_as_written() -> None:
    op, hook, ctx = memory_operator(oom_result(), try_number=2)
    _previous_try(hook, ctx, OOM, op)
    assert op.build_spec(ctx).roles["worker"].memory == 1024
