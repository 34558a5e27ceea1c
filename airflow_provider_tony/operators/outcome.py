"""What the task says of a finished job: its XCom result, the gate's verdict, the exception it fails with.

The operator concludes a job once (``airflow_provider_tony.conclusion``) and says the
conclusion with these: the XCom result downstream tasks read (bounded, whatever the
job's containers wrote), the verdict's XCom and log lines, the failed try's exception
(retried or not, with ``memory_retry``'s advice), the failed containers' logs copied into
the task log and the model asset's event.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_tony.operators import memory_retry
from airflow_provider_tony.runtime.errors import TonyError
from airflow_provider_tony.runtime.messages import MAX_DIAGNOSTICS_CHARS, GateResult, StateDocument
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.follower import JobResult
from airflow_provider_tony.yarn.logformat import log_groups, shown

#: The largest XCom result (JSON): whatever the job's containers wrote, downstream reads stay small.
XCOM_MAX_BYTES = 60 * 1024
#: Past ``XCOM_MAX_BYTES``, what the summarised XCom keeps: the newest events and
#: restarts, the start of the diagnostics (the cause comes first).
XCOM_SUMMARY_EVENTS = 20
XCOM_SUMMARY_RESTARTS = 10
XCOM_SUMMARY_DIAGNOSTICS = 4000
#: A final status is one word from YARN; more is a forged or broken one, cut here.
MAX_STATUS_CHARS = 40
#: The XCom key of the quality gate's verdict (also in the result when the model passed).
XCOM_QUALITY_GATE = "quality_gate"
#: The XCom key of a failed job's typed root cause (``runtime.messages.Failure``: kind, task, retryable,
#: and for ``out_of_memory`` the peak, the request and the field to raise), pushed before the task fails.
XCOM_FAILURE = "failure"


class Log(Protocol):
    """The task's logger (``BaseOperator.log``), as these functions write to it."""

    def info(self, msg: str, /, *args: Any) -> Any: ...

    def warning(self, msg: str, /, *args: Any) -> Any: ...

    def error(self, msg: str, /, *args: Any) -> Any: ...


class QualityGateFailed(AirflowFailException, TonyError):
    """The job trained, but its model is worse than the published one: not published, not retried.

    A retry would train on the same data and judge the same way; the figures
    are in the message, in the ``quality_gate`` XCom and on the job page.
    """

    def __init__(self, message: str, result: GateResult) -> None:
        super().__init__(message)
        self.result = result


def full_result(result: JobResult, spec: JobSpec | None) -> dict[str, Any]:
    """What downstream tasks read: ids, state, per-task summary, metrics, locations, cost."""
    state = result.am_state or StateDocument()
    tasks = {
        tid: {
            "state": t.state,
            "host": t.host,
            "exit_code": t.exit_code,
            "restored_step": t.restored_step,
            # Peak memory/CPU/GPU beside the role's request, with notes for a request used under half.
            "usage": t.usage.to_dict() if t.usage is not None else None,
        }
        for tid, t in state.tasks.items()
    }
    decider = state.task(spec.decider_task()) if spec is not None else None
    progress = decider.progress if decider is not None else None
    return {
        "application_id": result.app_id,
        "tracking_url": result.tracking_url,
        "final_state": result.final_status,
        "yarn_state": result.yarn_state,
        "diagnostics": result.diagnostics,
        "tasks": tasks,
        "metrics": dict(progress.metrics) if progress is not None else {},
        "step": progress.step if progress is not None else None,
        "events": state.artefact_events(),
        # In-application gang restarts (max_restarts): what failed, when, which step the gang resumed from.
        "restarts": [r.to_dict() for r in state.restarts],
        "name": spec.name if spec else None,
        "checkpoint_dir": spec.checkpoint.dir if spec else None,
        "model_dir": spec.checkpoint.model_dir if spec else None,
        # Resource-seconds from the RM's final report: what the run cost (None: YARN had forgotten it).
        "cost": result.cost.to_dict() if result.cost is not None else None,
        # The sweep's median rule stopped the trial (early_stopping): step, metric, value, median, finished_trials.
        "early_stopped": state.early_stopped.to_dict() if state.early_stopped is not None else None,
    }


def bounded_result(result: JobResult, spec: JobSpec | None, log: Log) -> dict[str, Any]:
    """The XCom, within ``XCOM_MAX_BYTES`` whatever the job's containers wrote: past it,
    per-task details become counts and the lists keep their newest entries."""
    value = full_result(result, spec)
    if len(json.dumps(value, default=str)) <= XCOM_MAX_BYTES:
        return value
    tasks = value["tasks"]
    value["tasks"] = {"count": len(tasks), "by_state": dict(Counter(str(t["state"]) for t in tasks.values()))}
    value["events"] = value["events"][-XCOM_SUMMARY_EVENTS:]
    value["restarts"] = value["restarts"][-XCOM_SUMMARY_RESTARTS:]
    value["diagnostics"] = value["diagnostics"][:XCOM_SUMMARY_DIAGNOSTICS]
    if len(json.dumps(value, default=str)) > XCOM_MAX_BYTES:
        value["metrics"], value["events"], value["restarts"] = {}, [], []
    log.warning("the job's result was too large for an XCom: per-task details are summarised")
    return value


def failed_logs(result: JobResult, container_logs: Callable[[str, str], dict[str, str]], log: Log) -> None:
    """Copy the failed containers' logs into the task log, where the cluster serves them."""
    tasks = result.am_state.tasks if result.am_state is not None else {}
    for task_id, task in sorted(tasks.items()):
        if not task.failed or not task.container_id:
            continue
        try:
            logs = container_logs(task.container_id, task.host or "")
        except Exception as exc:  # noqa: BLE001 - the diagnostics above already say what failed
            log.warning("could not fetch the logs of %s: %s", task_id, exc)
            continue
        for name, text in logs.items():  # folded: Airflow's log view collapses ::group:: sections
            for line in log_groups(f"{task_id} {name} ({task.container_id})", text):
                log.info("%s", line)


def failed_try(result: JobResult, spec: JobSpec | None, fail_fast_on_permanent: bool) -> AirflowException:
    """The exception a failed job fails its try with: retried, unless a retry would fail the same way."""
    status = shown(result.final_status, MAX_STATUS_CHARS)
    message = (
        f"TonY job {result.app_id} {status}: {shown(result.diagnostics, MAX_DIAGNOSTICS_CHARS)}\n"
        f"Logs: yarn logs -applicationId {result.app_id}"
    )
    failure = result.failure
    if failure is not None and failure.kind == memory_retry.OUT_OF_MEMORY:
        message += "\n" + memory_retry.advice(spec, failure.fix_field, failure.requested_mib)
        if memory_retry.retry_left(spec, failure.requested_mib):
            return AirflowException(message)
    if fail_fast_on_permanent and not result.retryable:
        return AirflowFailException(
            f"{message}\nNot retried: a retry would fail the same way (see the "
            "failure classification in docs/failures.md; list an exit code in the job's "
            "retryable_exit_codes to retry it)"
        )
    return AirflowException(message)


def with_verdict(value: dict[str, Any], verdict: GateResult, log: Log) -> dict[str, Any]:
    """The XCom result with the gate's verdict, said in the log; a failed verdict fails the task, not retried."""
    value = {**value, XCOM_QUALITY_GATE: verdict.to_dict(), "model_dir": verdict.model_dir}
    figures = f"{verdict.metric}: this run {verdict.value}, published model {verdict.previous}"
    if verdict.passed:
        log.info("quality gate passed (%s): %s", figures, verdict.reason)
        return value
    if verdict.awaiting_approval:  # not published, not refused: a person decides (quality_gate.approval)
        log.warning(
            "quality gate: awaiting approval (%s): %s; the model waits at %s",
            figures,
            verdict.reason,
            verdict.model_dir,
        )
        return {**value, "candidate": True}
    log.error("quality gate FAILED (%s): %s; the model stays at %s", figures, verdict.reason, verdict.model_dir)
    raise QualityGateFailed(
        f"quality gate failed for {value['application_id']}: {verdict.reason}. The model was not published (it "
        f"stays at {verdict.model_dir}); not retried: a retry would train and judge the same way",
        verdict,
    )


def held_candidate(value: dict[str, Any], model_dir: str, log: Log) -> dict[str, Any]:
    """The XCom result of a job whose gated model was kept, not judged (``publish=False``): where it waits."""
    from airflow_provider_tony.runtime.gate import candidate_dir

    folder = candidate_dir(model_dir, value["application_id"])
    log.info("model kept as a candidate at %s (publish=False: a later task may publish it)", folder)
    return {**value, "model_dir": folder, "candidate": True}


def announce_model(context: Any, asset: Any, value: dict[str, Any], log: Log) -> None:
    """The published model's event on ``asset`` (``asset_extra``) and the log line saying so, which
    ``make demo`` and the tests read for where the gate put it (the version folder)."""
    context["outlet_events"][asset].extra = asset_extra(value)
    log.info("model %s published: asset %s", value["model_dir"], asset.uri)


def asset_extra(value: dict[str, Any]) -> dict[str, Any]:
    """The model asset's event: where the published model is, who made it, its step, metrics and verdict."""
    return {
        "model_dir": value["model_dir"],
        "application_id": value["application_id"],
        "step": value["step"],
        "metrics": value["metrics"],
        **({XCOM_QUALITY_GATE: value[XCOM_QUALITY_GATE]} if XCOM_QUALITY_GATE in value else {}),
    }


__all__ = [
    "MAX_STATUS_CHARS",
    "XCOM_FAILURE",
    "XCOM_MAX_BYTES",
    "XCOM_QUALITY_GATE",
    "XCOM_SUMMARY_DIAGNOSTICS",
    "XCOM_SUMMARY_EVENTS",
    "XCOM_SUMMARY_RESTARTS",
    "Log",
    "QualityGateFailed",
    "announce_model",
    "asset_extra",
    "bounded_result",
    "failed_logs",
    "failed_try",
    "full_result",
    "with_verdict",
]
