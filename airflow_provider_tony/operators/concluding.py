"""The operator's side of a finished job: concluded once, told in the task log, the XCom and lineage.

``Concluding`` is mixed into ``TonyOperator``. Every path that sees the job end
(polling, the deferred ``execute_complete``, a re-attach, the re-use of an application
that had already succeeded) hands its ``JobResult`` to ``_concluded``, which calls
``airflow_provider_tony.conclusion.conclude`` once per operator (final cost, quality
gate, history note, retention) and tells the conclusion with ``operators/outcome.py``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowException

from airflow_provider_tony.conclusion import Conclusion, TaskRuns, conclude
from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.operators import identity, outcome
from airflow_provider_tony.operators.outcome import MAX_STATUS_CHARS, XCOM_FAILURE, XCOM_QUALITY_GATE
from airflow_provider_tony.runtime.errors import TonyError
from airflow_provider_tony.runtime.messages import MAX_DIAGNOSTICS_CHARS
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.follower import JobResult
from airflow_provider_tony.yarn.logformat import shown

if TYPE_CHECKING:
    _Operator = BaseOperator
else:  # a plain class at run time: TonyOperator's MRO holds BaseOperator
    _Operator = object


class Concluding(_Operator):
    """How the operator concludes and tells a finished job (``_concluded``), and reads an ended one."""

    model_asset: Asset | None
    fail_fast_on_permanent: bool
    publish: bool
    _spec: JobSpec | None
    #: The finished job's conclusion (what lineage describes) and the XCom it was told as (once per
    #: operator, ``_concluded``: whichever path saw the job end, however often the mixin asks for the result).
    _conclusion: Conclusion | None
    _told: dict[str, Any] | None

    @property
    def hook(self) -> YarnHook:
        raise NotImplementedError  # the operator's

    def ended_result(self, app_id: str) -> JobResult:
        """How an ended application went: YARN's report plus the AM's stored history.

        When YARN has forgotten the application (an RM restart, its retention),
        the stored history alone answers.
        """
        try:
            stored = self.hook.stored_history(app_id)
        except TonyError as exc:
            self.log.warning("no stored history for %s: %s", app_id, exc)
            stored = None
        state = stored.state if stored is not None else None
        try:
            return JobResult.from_report(self.hook.report(app_id), state)
        except TonyError:
            if state is None:
                raise
            status = "SUCCEEDED" if state.app_state == "SUCCEEDED" else "FAILED"
            return JobResult(app_id, "FINISHED", status, state.diagnostics, self.hook.tracking_url(app_id), state)

    def _concluded(self, result: JobResult, context: Context) -> dict[str, Any]:
        """The ended job concluded (``conclusion.conclude``: final cost, gate, history, retention) and told.

        Every path that sees the job end comes here (polling, ``execute_complete``, a
        re-attach, the re-use of a succeeded application), once per operator: the mixin
        asks for the result again after polling returned it, and gets the same XCom, so
        nothing is judged, pruned or announced twice. Told in the task log in the order it
        happened: the end, the result, the gate's verdict, retention, the model's event.
        """
        if self._told is not None and self._told["application_id"] == result.app_id:
            return self._told
        spec, ti = self._spec, context["ti"]
        runs = TaskRuns(self.hook, identity.task_folder(self.hook.base_path, ti)) if spec is not None else None
        done = self._conclusion = conclude(self.hook, spec, result, runs=runs, publish=self.publish)
        if done.cost_error is not None:
            self.log.warning("no final cost for %s: %s", result.app_id, done.cost_error)
        self._finish(done.result, context)
        value = self.xcom_result(done.result)
        if done.undecided is not None:  # HDFS trouble: retried, the model stays a candidate
            error = f"{type(done.undecided).__name__}: {done.undecided}"
            raise AirflowException(f"quality gate of {result.app_id} not decided: {error}") from done.undecided
        if done.history_error is not None:
            self.log.warning("could not add the gate's verdict to the job's history: %s", done.history_error)
        if done.held and spec is not None and spec.checkpoint.model_dir:
            value = outcome.held_candidate(value, spec.checkpoint.model_dir, self.log)
        if done.gate is not None:
            ti.xcom_push(key=XCOM_QUALITY_GATE, value=done.gate.to_dict())
            value = outcome.with_verdict(value, done.gate, self.log)
        for path, why in done.pruned:
            self.log.info("retention: removing %s (%s)", path, why)
        if done.retention_error is not None and runs is not None:
            self.log.warning("retention: could not prune %s: %s", runs.folder, done.retention_error)
        if self.model_asset is not None and done.published:
            outcome.announce_model(context, self.model_asset, value, self.log)
        if done.early_stopped is not None:  # the conclusion's last word: stopped on purpose, no model
            if spec is not None and spec.quality_gate.enabled:
                self.log.info("quality gate skipped: the trial was stopped early and has no model to judge")
            self.log.info("%s %s", result.app_id, done.early_stopped.line())
        self._told = value
        return value

    def _finish(self, result: JobResult, context: Context | None = None) -> None:
        """Say how the job ended; a failed one fails the try, its containers' logs copied into the task log."""
        if result.cost is not None:
            self.log.info("cost of %s: %s", result.app_id, result.cost.line())
        if result.succeeded:
            self.log.info("%s SUCCEEDED: %s", result.app_id, shown(result.diagnostics, MAX_DIAGNOSTICS_CHARS))
            return
        self.log.error(
            "%s %s: %s",
            result.app_id,
            shown(result.final_status, MAX_STATUS_CHARS),
            shown(result.diagnostics, MAX_DIAGNOSTICS_CHARS),
        )
        outcome.failed_logs(result, self.hook.container_logs, self.log)
        if context is not None and result.failure is not None:
            context["ti"].xcom_push(key=XCOM_FAILURE, value=result.failure.to_dict())
        raise outcome.failed_try(result, self._spec, self.fail_fast_on_permanent)

    # ------------------------------------------------------------ OpenLineage

    def _lineage_namespace(self) -> str:
        """The datasets' namespace: the cluster's ``fs.defaultFS`` (``hdfs://namenode:8020``), else ``hdfs``."""
        try:
            return self.hook.default_fs()
        except Exception:  # noqa: BLE001 - lineage must never fail the task
            return "hdfs"

    def _lineage(self, *, complete: bool) -> Any:
        from airflow_provider_tony.lineage import operator_lineage

        done = self._conclusion
        result = self._xcom_result(done.result) if done is not None else None
        verdict = done.gate if done is not None else None
        published = complete and (verdict is None or verdict.passed)
        namespace = self._lineage_namespace()
        as_dict = verdict.to_dict() if verdict is not None else None
        return operator_lineage(self._spec, namespace, result, as_dict, model_published=published)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Called by Airflow's OpenLineage provider: inputs read, checkpoint and model folders written,
        the application id, metrics, restarts and the quality gate (``airflow_provider_tony.lineage``)."""
        return self._lineage(complete=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """As on completion, without the model folder: a failed task (or a failed gate) published none."""
        return self._lineage(complete=False)

    def xcom_result(self, result: JobResult) -> dict[str, Any]:
        """What downstream tasks read: ids, state, per-task summary, metrics, locations."""
        value = self._xcom_result(result)
        self.log.info("result: %s", json.dumps(value, sort_keys=True, default=str))
        return value

    def _xcom_result(self, result: JobResult) -> dict[str, Any]:
        """The XCom, within ``XCOM_MAX_BYTES`` whatever the job's containers wrote (``outcome.bounded_result``)."""
        return outcome.bounded_result(result, self._spec, self.log)

    @property
    def _result(self) -> JobResult | None:
        """The ended job's result, with its final cost (None until the job was concluded)."""
        return self._conclusion.result if self._conclusion is not None else None


__all__ = ["Concluding"]
