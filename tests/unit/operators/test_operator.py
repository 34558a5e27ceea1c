"""TonyOperator end to end against a fake cluster: what a provider's operator tests cover.

The hook is replaced by a fake whose client records submissions and returns
made-up results, so these tests check the operator's decisions (XCom on
success, which exception on failure, deferral and ``execute_complete``) with no
cluster, JVM or Airflow services.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred

from airflow_provider_tony.links import XCOM_JOB_PAGE_URL, XCOM_TENSORBOARD_URL, XCOM_TRACKING_URL
from airflow_provider_tony.operators.tony import TonyOperator
from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.messages import Cost, JobHistory, Usage
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn.follower import AppReport, JobResult, TonyEvent
from tests.unit.support.operator import (
    APP,
    URL,
    FakeHook,
    OutletEvents,
    failed,
    final_document,
    log_lines,
    operator,
    succeeded,
)


def test_success_returns_the_xcom_result_and_pushes_the_links() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False, poll_interval=0.5)
    hook.cost = Cost(vcore_seconds=12, memory_mb_seconds=3456, gpu_seconds=7, final=True)
    value = op.execute(ctx)
    assert hook.costs_asked == [APP], "the ending report undercounts: the final count is asked for"
    assert len(hook.submitted) == 1
    spec, attempt, tags = hook.submitted[0]
    assert attempt == 1 and "tony-task:train" in tags and "tony-try:1" in tags
    assert hook.client.waited[0]["app_id"] == APP and hook.client.waited[0]["poll_interval"] == 0.5
    assert value == {
        "application_id": APP,
        "tracking_url": URL,
        "final_state": "SUCCEEDED",
        "yarn_state": "FINISHED",
        "diagnostics": "worker:0 succeeded",
        "tasks": {
            "worker:0": {
                "state": "SUCCEEDED",
                "host": "node1",
                "exit_code": 0,
                "restored_step": 30,
                "usage": {**Usage(samples=4, peak_rss_bytes=100 << 20).to_dict(), "notes": ["lean"]},
            },
            "worker:1": {"state": "STOPPED", "host": "node2", "exit_code": None, "restored_step": None, "usage": None},
        },
        "metrics": {"val_accuracy": 0.91},
        "step": 60,
        "events": [
            "restart 1: the new gang resumed from checkpoint step 30, 15.0s after the failure",
            "worker:0 restored checkpoint step 30 from /ckpt/ckpt-30 in 0.2s",
        ],
        "restarts": [
            {
                "attempt": 1,
                "failed_task": "worker:1",
                "reason": "worker:1 lost",
                "cause": "",
                "consequences": [],
                "host": "node3",
                "at": 40.0,
                "at_wall": None,
                "last_step": None,
                "resumed_step": 30,
                "resumed_at": 55.0,
                "drained_step": None,
                "drain_seconds": None,
                "moved": {},
            }
        ],
        "name": "nightly.train",
        "checkpoint_dir": "/user/airflow/tony/checkpoints/nightly/train/manual__1",
        "model_dir": "/user/airflow/models/digits",
        "cost": {
            "vcore_seconds": 12,
            "memory_mb_seconds": 3456,
            "gpu_seconds": 7,
            "preempted_vcore_seconds": 0,
            "preempted_memory_mb_seconds": 0,
            "preempted_gpu_seconds": 0,
            "final": True,
        },
        "early_stopped": None,
    }
    assert ctx["ti"].xcom[XCOM_TRACKING_URL] == URL and ctx["ti"].xcom["application_id"] == APP
    assert ctx["ti"].xcom[XCOM_TENSORBOARD_URL] == ""
    assert ctx["ti"].xcom[XCOM_JOB_PAGE_URL] == f"http://rm:8088/proxy/{APP}/pages/tony/"
    assert ctx["ti"].xcom["yarn_conn_id"] == "tony_yarn_default"  # the UI's job view reads through it
    assert hook.killed == [] and hook.logs_asked == []
    # the durable path ran: the mixin kept the application id for the next try
    assert ctx["task_state_store"] == {TonyOperator.external_id_key: APP}


def test_failure_raises_with_the_diagnostics_and_copies_the_failed_containers_logs() -> None:
    op, hook, ctx = operator(failed("worker:0 exited with code 1 on node1; last stderr line: boom"), deferrable=False)
    with pytest.raises(AirflowException) as info:
        op.execute(ctx)
    assert isinstance(info.value, AirflowFailException), "a script's exit 1 is not retried by default"
    assert "retryable_exit_codes" in str(info.value), "the message says how to retry it anyway"
    assert "worker:0 exited with code 1" in str(info.value)
    assert f"yarn logs -applicationId {APP}" in str(info.value)
    assert hook.logs_asked == [("container_1_0042_01_000002", "node1")], "only the failed task's logs"


@pytest.mark.parametrize(
    ("diagnostics", "retried"),
    [
        ("worker:0 exited with code 1 on node1; last stderr line: boom", False),
        (f"{RETRYABLE_MARK} worker:0 exited with code 137 on node1; last stderr line: Killed", True),
    ],
)
@pytest.mark.parametrize("deferrable", [False, True])
def test_only_retryable_failures_are_left_to_retries(diagnostics: str, retried: bool, deferrable: bool) -> None:
    op, _hook, ctx = operator(failed(diagnostics), deferrable=deferrable)
    with pytest.raises(AirflowException) as info:
        if deferrable:
            op.execute_complete(ctx, TonyEvent.done(failed(diagnostics)).to_dict())
        else:
            op.execute(ctx)
    assert isinstance(info.value, AirflowFailException) is not retried, info.value


def test_fail_fast_off_leaves_every_failure_to_retries() -> None:
    op, _hook, ctx = operator(
        failed("worker:0 exited with code 1 on node1"), deferrable=False, fail_fast_on_permanent=False
    )
    with pytest.raises(AirflowException) as info:
        op.execute(ctx)
    assert not isinstance(info.value, AirflowFailException)


def test_deferral_hands_the_trigger_primitives_and_execute_complete_returns_the_xcom() -> None:
    op, hook, ctx = operator(
        succeeded(), deferrable=True, poll_interval=7.0, am_stale_timeout=90.0, am_unreachable_timeout=12.5
    )
    before = time.time()
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    trigger = info.value.trigger
    assert isinstance(trigger, TonyTrigger) and info.value.method_name == "execute_complete"
    path, kwargs = trigger.serialize()
    # The start-up deadline's anchor: the submission, on the wall clock (a restarted triggerer keeps it).
    assert before <= kwargs.pop("started_at") <= time.time() and kwargs.pop("last_heard_at") is None
    assert (path, kwargs) == (
        "airflow_provider_tony.triggers.tony.TonyTrigger",
        {
            "app_id": APP,
            "yarn_conn_id": "tony_yarn_default",
            "poll_interval": 7.0,
            "startup_timeout": 600.0,
            "am_stale_timeout": 90.0,
            "rm_outage_timeout": 600.0,
            "am_unreachable_timeout": 12.5,
        },
    )
    assert hook.client.waited == [], "a deferred task does not poll in the worker"

    # The trigger's event travels through Airflow's database as primitives.
    event = TonyEvent.done(succeeded()).to_dict()
    value = op.execute_complete(ctx, event)
    assert value["final_state"] == "SUCCEEDED" and value["metrics"] == {"val_accuracy": 0.91}


def test_execute_complete_fails_on_a_failed_result_and_on_an_error_event() -> None:
    op, _hook, ctx = operator(succeeded(), deferrable=True)
    with pytest.raises(AirflowException, match="worker:0 exited with code 3"):
        op.execute_complete(ctx, TonyEvent.done(failed("worker:0 exited with code 3")).to_dict())
    with pytest.raises(AirflowException, match=f"lost track of {APP}: ResourceManager at http://rm unreachable"):
        op.execute_complete(ctx, TonyEvent.error(APP, "ResourceManager at http://rm unreachable").to_dict())


def test_a_job_that_already_succeeded_for_this_task_run_is_reused_not_resubmitted() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    tags = op.identity_tags(ctx)
    hook.apps = [AppReport(app_id=APP, state="FINISHED", final_status="SUCCEEDED", tracking_url=URL, tags=tags)]
    assert op.submit_job(ctx) == APP
    assert hook.submitted == []
    assert op.get_job_status(APP, ctx) == "SUCCEEDED"


def _lost_track_then_retry(hook: FakeHook) -> tuple[TonyOperator, dict[str, Any]]:
    """A deferred first try submitted; its trigger lost track of the application (an RM outage)
    and the try failed. The retry is a fresh operator with a fresh task state store: Airflow's
    deferral path keeps nothing there, so only the operator's own tag search can find the job."""
    first, _, ctx = operator(succeeded(), deferrable=True)
    first._hook = hook  # type: ignore[assignment]
    with pytest.raises(TaskDeferred):
        first.execute(ctx)
    with pytest.raises(AirflowException, match="lost track"):
        first.execute_complete(ctx, TonyEvent.error(APP, "ResourceManager unreachable").to_dict())
    retry, _, rctx = operator(succeeded(), deferrable=True)
    retry._hook = hook  # type: ignore[assignment]
    rctx["ti"].try_number = 2
    return retry, rctx


def test_a_deferred_retry_after_lost_track_reattaches_to_the_running_application() -> None:
    """The operator's own re-attach (``_existing``), not the mixin's: no task state store entry."""
    hook = FakeHook(succeeded())
    retry, rctx = _lost_track_then_retry(hook)
    hook.apps[0].state = "RUNNING"  # the first try's application trains on
    with pytest.raises(TaskDeferred) as info:
        retry.execute(rctx)
    assert len(hook.submitted) == 1, "a second application was submitted for the same task run"
    assert info.value.trigger.serialize()[1]["app_id"] == APP
    assert rctx["ti"].xcom["application_id"] == APP and rctx["task_state_store"] == {}


def test_a_deferred_retry_after_the_application_failed_submits_a_new_one() -> None:
    hook = FakeHook(succeeded())
    retry, rctx = _lost_track_then_retry(hook)
    hook.apps[0].state, hook.apps[0].final_status = "FINISHED", "FAILED"
    with pytest.raises(TaskDeferred) as info:
        retry.execute(rctx)
    assert len(hook.submitted) == 2
    second = info.value.trigger.serialize()[1]["app_id"]
    assert second != APP and hook.apps[0].app_id == second and "tony-try:2" in hook.submitted[1][2]


def test_another_task_runs_application_is_never_reattached() -> None:
    hook = FakeHook(succeeded())
    other = ["tony-dag:nightly", "tony-task:train", "tony-run:manual__0", "tony-map:-1"]
    hook.apps = [AppReport(app_id="application_1700000000000_0007", state="RUNNING", tags=other)]
    op, _, ctx = operator(succeeded(), deferrable=True)
    op._hook = hook  # type: ignore[assignment]
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    assert len(hook.submitted) == 1 and info.value.trigger.serialize()[1]["app_id"] != "application_1700000000000_0007"


def test_a_polling_retry_reattaches_through_the_mixins_task_state_store() -> None:
    """The mixin's re-attach: the stored id of a running application is followed, nothing is
    submitted, and the operator's tag search is not what found it."""
    op, hook, ctx = operator(succeeded(), deferrable=False)
    ctx["task_state_store"].set(TonyOperator.external_id_key, APP)
    hook.report = lambda app_id: AppReport(app_id=app_id, state="RUNNING")  # type: ignore[method-assign]
    searched: list[list[str]] = []
    find = hook.find_by_tags
    hook.find_by_tags = lambda tags, active_only=True: searched.append(tags) or find(tags, active_only=active_only)  # type: ignore[method-assign]
    value = op.execute(ctx)
    assert hook.submitted == [] and searched == [], "the mixin reconnected before any submit or search"
    assert hook.client.waited[0]["app_id"] == APP and value["application_id"] == APP


def test_a_reused_application_gets_its_tasks_and_metrics_from_the_stored_history() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    op._spec = op.build_spec(ctx)
    hook.client.stored = JobHistory(state=final_document())
    value = op.get_job_result(APP, ctx)
    assert value["metrics"] == {"val_accuracy": 0.91} and value["step"] == 60
    assert value["tasks"]["worker:0"]["restored_step"] == 30


def test_when_yarn_forgot_the_application_the_stored_history_answers() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    hook.client.stored = JobHistory(state=final_document())

    def forgotten(app_id: str) -> AppReport:
        raise ClusterError(f"the ResourceManager does not know {app_id}")

    hook.report = forgotten  # type: ignore[method-assign]
    result = op.ended_result(APP)
    assert result.succeeded and result.am_state == final_document()
    hook.client.stored = None
    with pytest.raises(ClusterError, match="does not know"):
        op.ended_result(APP)


def test_a_lost_connection_while_polling_kills_the_application() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)

    def broken(app_id: str, **kwargs: Any) -> JobResult:
        raise ConnectionError("RM gone")

    hook.client.wait = broken  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        op.execute(ctx)
    assert hook.killed == [APP], "the job must not outlive the task"


def test_on_kill_kills_the_application_it_follows() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    op.on_kill()
    assert hook.killed == [], "nothing submitted yet: nothing to kill"
    op.submit_job(ctx)
    op.on_kill()
    assert hook.killed == [APP]


@pytest.mark.parametrize("make", [succeeded, lambda: failed("[retryable] worker:0 lost")])
def test_the_xcom_result_is_the_same_in_both_modes_field_by_field(make: Any) -> None:
    polling, _hook, ctx = operator(make(), deferrable=False)
    try:
        direct = polling.execute(ctx)
    except AirflowException:
        direct = polling._xcom_result(polling._result)  # type: ignore[arg-type]
    deferring, _, dctx = operator(make(), deferrable=True)
    with pytest.raises(TaskDeferred):
        deferring.execute(dctx)
    fresh, _, fctx = operator(make(), deferrable=True)  # execute_complete runs on a new instance
    assert fresh._spec is None
    event = TonyEvent.done(make()).to_dict()
    try:
        after = fresh.execute_complete(fctx, event)
    except AirflowException:
        after = fresh._xcom_result(fresh._result)  # type: ignore[arg-type]
    assert set(after) == set(direct)
    for key in direct:
        assert after[key] == direct[key], key
    assert after["checkpoint_dir"] and after["model_dir"] and after["step"] == 60 and after["metrics"]


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_published_model_emits_an_event_on_the_model_asset(deferrable: bool) -> None:
    from airflow_provider_tony.assets import model_asset

    asset = model_asset("digits")
    op, _hook, ctx = operator(succeeded(), deferrable=deferrable, model_asset=asset)
    assert asset in op.outlets, "declared as an outlet, so Airflow schedules consumers on it"
    ctx["outlet_events"] = OutletEvents()
    if deferrable:
        op.execute_complete(ctx, TonyEvent.done(succeeded()).to_dict())
    else:
        op.execute(ctx)
    assert ctx["outlet_events"][asset].extra == {
        "model_dir": "/user/airflow/models/digits",
        "application_id": APP,
        "step": 60,
        "metrics": {"val_accuracy": 0.91},
    }


def test_a_failed_job_or_no_model_asset_emits_nothing() -> None:
    from airflow_provider_tony.assets import model_asset

    op, _hook, ctx = operator(
        failed("worker:0 exited with code 1"), deferrable=False, model_asset=model_asset("digits")
    )
    ctx["outlet_events"] = OutletEvents()
    with pytest.raises(AirflowException):
        op.execute(ctx)
    assert dict(ctx["outlet_events"]) == {}
    plain, _hook, pctx = operator(succeeded(), deferrable=False)
    pctx["outlet_events"] = OutletEvents()
    plain.execute(pctx)
    assert plain.outlets == [] and dict(pctx["outlet_events"]) == {}


def test_model_asset_names_are_checked() -> None:
    from airflow_provider_tony.assets import model_asset

    assert model_asset("digits") == model_asset("digits") and model_asset("digits").uri.startswith(
        "tony-model://digits"
    )
    with pytest.raises(ValueError, match="model_asset\\('digits'\\)"):
        model_asset("../etc")


def test_links_read_the_xcom_the_operator_writes_at_submit_so_they_are_live_while_polling() -> None:
    from airflow_provider_tony.links import TensorBoardLink, YarnApplicationLink

    # Airflow 3.3 renders a link from the XCom under its xcom_key: the key the operator pushes.
    assert YarnApplicationLink().xcom_key == XCOM_TRACKING_URL
    assert TensorBoardLink().xcom_key == XCOM_TENSORBOARD_URL
    op, hook, ctx = operator(succeeded(), deferrable=False)
    seen_while_waiting: dict[str, Any] = {}
    wait = hook.client.wait

    def wait_and_look(app_id: str, **kwargs: Any) -> JobResult:
        seen_while_waiting.update(ctx["ti"].xcom)
        return wait(app_id, **kwargs)

    hook.client.wait = wait_and_look  # type: ignore[method-assign]
    op.execute(ctx)
    assert seen_while_waiting[XCOM_TRACKING_URL] == URL, "the YARN link is there before the job ends"


def test_a_job_with_a_tensorboard_role_links_its_page_at_submit_even_when_deferred() -> None:
    op, _hook, ctx = operator(succeeded(), deferrable=True)
    op.job["roles"]["tensorboard"] = {"module": "airflow_provider_tony.runtime.tensorboard"}
    with pytest.raises(TaskDeferred):
        op.execute(ctx)
    assert ctx["ti"].xcom[XCOM_TENSORBOARD_URL] == f"http://rm:8088/proxy/{APP}/pages/tensorboard/"
    plain, _, pctx = operator(succeeded(), deferrable=True)
    with pytest.raises(TaskDeferred):
        plain.execute(pctx)
    assert pctx["ti"].xcom[XCOM_TENSORBOARD_URL] == "", "no tensorboard role, no link"


def test_a_job_yarn_forgot_ends_as_its_stored_history_says() -> None:
    op, hook, _ = operator(succeeded(), deferrable=False)
    stored = final_document(failed=True)
    stored.diagnostics = "worker:0 exited with code 1"
    hook.client.stored = JobHistory(state=stored)
    asked: list[str] = []

    def forgotten(app_id: str) -> AppReport:
        asked.append(app_id)
        raise ClusterError(f"the ResourceManager does not know {app_id}")

    hook.report = forgotten  # type: ignore[method-assign]
    result = op.ended_result(APP)
    assert result == JobResult(APP, "FINISHED", "FAILED", "worker:0 exited with code 1", URL, stored)
    assert asked == [APP]


def test_without_stored_history_yarns_report_answers_and_the_log_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_tony.runtime.errors import TonyError

    op, hook, _ = operator(succeeded(), deferrable=False)
    asked: list[str] = []

    def no_history(app_id: str) -> JobHistory:
        asked.append(app_id)
        raise TonyError("HDFS unreachable")

    reports: list[str] = []
    report = hook.report

    def recorded(app_id: str) -> AppReport:
        reports.append(app_id)
        return report(app_id)

    hook.client.stored_history = no_history  # type: ignore[method-assign]
    hook.report = recorded  # type: ignore[method-assign]
    warned: list[str] = []
    monkeypatch.setattr(op.log, "warning", lambda msg, *args: warned.append(msg % args))
    result = op.ended_result(APP)
    assert asked == [APP] and reports == [APP]
    assert result.succeeded and result.app_id == APP and result.am_state is None
    assert warned == [f"no stored history for {APP}: HDFS unreachable"]


@pytest.mark.parametrize(
    ("state", "final_status", "status"),
    [
        ("RUNNING", "UNDEFINED", "RUNNING"),
        ("FINISHED", "SUCCEEDED", "SUCCEEDED"),
        ("FINISHED", "FAILED", "FAILED"),
        ("KILLED", "KILLED", "FAILED"),
    ],
)
def test_the_mixins_status_words(state: str, final_status: str, status: str) -> None:
    """What ResumableJobMixin reconnects on (active), returns at once (succeeded) or resubmits (the rest)."""
    op, hook, ctx = operator(succeeded(), deferrable=False)
    asked: list[str] = []
    hook.report = lambda app_id: asked.append(app_id) or AppReport(app_id, state, final_status)  # type: ignore[method-assign]
    assert op.get_job_status(APP, ctx) == status and asked == [APP]
    assert op.is_job_active(status) is (status == "RUNNING")
    assert op.is_job_succeeded(status) is (status == "SUCCEEDED")


def test_the_task_log_says_submitted_reattached_succeeded_and_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Users (and the integration tests) read these lines in the Airflow log."""
    op, hook, ctx = operator(succeeded(), deferrable=False)
    lines = log_lines(op, monkeypatch)
    op._spec = op.build_spec(ctx)
    op.submit_job(ctx)
    assert f"info: submitted {APP} (nightly.train)" in lines
    assert hook.submitted[0][0] == op._spec.with_overrides(tags=hook.submitted[0][2]) and hook.submitted[0][1] == 1
    op._finish(succeeded())
    assert lines[-1] == f"info: {APP} SUCCEEDED: worker:0 succeeded"
    hook.apps[0].state = "RUNNING"
    op.submit_job(ctx)
    assert f"info: re-attaching to {APP} (RUNNING), submitted for this task run earlier; not submitting again" in lines
    with pytest.raises(AirflowException) as info:
        op._finish(failed("[retryable] worker:0 lost"))
    assert f"error: {APP} FAILED: [retryable] worker:0 lost" in lines
    assert str(info.value) == f"TonY job {APP} FAILED: [retryable] worker:0 lost\nLogs: yarn logs -applicationId {APP}"
    with pytest.raises(AirflowFailException) as fail:
        op._finish(failed("worker:0 exited with code 1"))
    assert str(fail.value).endswith(
        "\nNot retried: a retry would fail the same way (see the failure classification in docs/failures.md;"
        " list an exit code in the job's retryable_exit_codes to retry it)"
    )


def test_a_first_try_without_a_try_number_is_attempt_1_and_a_bad_job_submits_nothing() -> None:
    from airflow_provider_tony.runtime.errors import SpecError

    op, hook, ctx = operator(succeeded(), deferrable=False)
    ctx["ti"].try_number = None
    op.submit_job(ctx)
    assert hook.submitted[0][1] == 1 and "tony-try:none" in hook.submitted[0][2]
    bad, bad_hook, bctx = operator(succeeded(), deferrable=False)

    def refuse(spec: Any, **kwargs: Any) -> str:
        raise SpecError("roles.worker.memory", "too much")

    bad_hook.submit = refuse  # type: ignore[method-assign]
    with pytest.raises(AirflowFailException) as info:
        bad.submit_job(bctx)
    assert str(info.value) == "invalid job, nothing was submitted: roles.worker.memory: too much"


@pytest.mark.parametrize("retryable", [True, False])
def test_a_missing_input_is_retried_as_the_input_says(retryable: bool) -> None:
    """A late partition (the check before submit) fails the try; Airflow retries it unless the input says not."""
    from airflow_provider_tony.runtime.errors import InputMissing

    op, hook, ctx = operator(succeeded(), deferrable=False)

    def missing(spec: Any, **kwargs: Any) -> str:
        raise InputMissing("inputs.clicks.path", "/d/dt=1", "/d/dt=1 does not exist", retryable=retryable)

    hook.submit = missing  # type: ignore[method-assign]
    with pytest.raises(AirflowException) as info:
        op.submit_job(ctx)
    assert isinstance(info.value, AirflowFailException) is not retryable
    assert str(info.value) == "inputs.clicks.path: /d/dt=1 does not exist"


def test_execute_complete_never_succeeds_without_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    op, _hook, ctx = operator(succeeded(), deferrable=True)
    with pytest.raises(AirflowException, match=f"^lost track of {APP}: "):
        op.execute_complete(ctx, {"status": TonyEvent.DONE, "app_id": APP, "result": None})
    op._app_id = APP
    with pytest.raises(AirflowException) as info:
        op.execute_complete(ctx, {"status": "done", "result": {"app_id": APP}})
    assert str(info.value).startswith(f"lost track of {APP}: the trigger's event is unreadable (event")
    assert op._app_id == APP, "on_kill still knows the application"
    fresh, _hook, fctx = operator(succeeded(), deferrable=True)
    with pytest.raises(AirflowException, match="^lost track of None: "):
        fresh.execute_complete(fctx, {"status": "done"})
    assert fresh._app_id is None


def test_execute_complete_describes_the_result_even_when_the_job_cannot_be_rebuilt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op, _hook, ctx = operator(succeeded(), deferrable=True)
    lines = log_lines(op, monkeypatch)

    def broken(context: Any) -> Any:
        raise ValueError("template gone")

    monkeypatch.setattr(op, "build_spec", broken)
    seen: list[Any] = []
    monkeypatch.setattr(op, "_on_state", lambda context, doc: seen.append((context, doc)))
    value = op.execute_complete(ctx, TonyEvent.done(succeeded()).to_dict())
    assert value["final_state"] == "SUCCEEDED" and value["checkpoint_dir"] is None
    assert "warning: could not rebuild the job to describe its result: template gone" in lines
    assert seen == [(ctx, final_document())]


def test_a_reused_application_is_announced_and_described_from_its_own_history() -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    other = "application_1700000000000_0099"
    hook.client.stored = JobHistory(state=final_document())
    asked: list[str] = []
    report = hook.report
    hook.report = lambda app_id: asked.append(app_id) or report(app_id)  # type: ignore[method-assign]
    value = op.get_job_result(other, ctx)
    assert asked == [other] and value["application_id"] == other
    assert ctx["ti"].xcom["application_id"] == other, "the links point at the reused application"


def test_a_reused_successful_application_announces_its_model() -> None:
    from airflow_provider_tony.assets import model_asset

    asset = model_asset("digits")
    op, hook, ctx = operator(succeeded(), deferrable=False, model_asset=asset)
    op._spec = op.build_spec(ctx)
    hook.client.stored = JobHistory(state=final_document())
    ctx["outlet_events"] = OutletEvents()
    op.get_job_result(APP, ctx)
    assert ctx["outlet_events"][asset].extra["application_id"] == APP


def test_a_final_cost_in_the_result_is_not_asked_for_again_and_an_unreachable_rm_changes_no_outcome() -> None:
    done = succeeded()
    done.cost = Cost(vcore_seconds=5, memory_mb_seconds=50, final=True)
    op, hook, ctx = operator(done, deferrable=False)
    assert op.execute(ctx)["cost"]["memory_mb_seconds"] == 50 and hook.costs_asked == []

    def unreachable(app_id: str) -> None:
        raise ClusterError("the ResourceManager does not answer")

    op, hook, ctx = operator(succeeded(), deferrable=False)
    hook.final_cost = unreachable  # type: ignore[method-assign]
    assert op.execute(ctx)["cost"] is None
