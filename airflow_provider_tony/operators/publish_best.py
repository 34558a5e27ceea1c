"""``TonyPublishBestOperator``: one publication per sweep, the best trial through the quality gate.

Each trial of a sweep is a mapped ``TonyOperator`` with ``publish=False``: its model waits
as a candidate and nothing is judged. This task, downstream of all of them, ranks the
trials' results (``airflow_provider_tony.sweep_ranking``), sends only the best through the job's
quality gate (``runtime/gate.py``: against the last published model, under the same lock,
the same versions and pointer as any publication), and emits the model asset's event
once. The other trials' models stay as candidates, named in the XCom with their figures,
for a person to compare or publish by hand; trials stopped early by the median rule are
listed apart (they have no model).

The job it is given is a trial's (any one: the trials share ``checkpoint.model_dir`` and
``quality_gate``, which say where and how to publish). It submits nothing to YARN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_tony.conclusion import judged
from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.operators import outcome
from airflow_provider_tony.operators.outcome import XCOM_QUALITY_GATE
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.sweep_ranking import rank

__all__ = ["TonyPublishBestOperator"]


class TonyPublishBestOperator(BaseOperator):
    """Publish the best of a sweep's trials through the quality gate; the rest stay candidates.

    :param trials: the trials' XCom results, e.g. ``train.output`` of the mapped ``TonyOperator``. (templated)
    :param job: a trial's job (a dict in ``JobSpec`` form; any one): its ``checkpoint.model_dir`` and
        ``quality_gate`` (metric, mode, record, tolerance) decide where and how. (templated)
    :param model_asset: emits one event when the best trial's model is published.
    :param approved: a person approved the model (Airflow's ``ApprovalOperator`` upstream): one held by
        ``quality_gate.approval`` (within tolerance below the published one) is published; without it the
        gate holds such a model again. A model beyond the tolerance is refused either way.
    :param yarn_conn_id: the ``tony_yarn`` connection (its WebHDFS client publishes).
    """

    template_fields: Sequence[str] = ("trials", "job")
    template_fields_renderers = {"job": "json"}
    ui_color = "#ffe0b2"

    def __init__(
        self,
        *,
        trials: Any,
        job: dict[str, Any],
        model_asset: Asset | None = None,
        yarn_conn_id: str = YarnHook.default_conn_name,
        approved: bool = False,
        **kwargs: Any,
    ) -> None:
        if model_asset is not None:
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), model_asset]
        super().__init__(**kwargs)
        self.trials = trials
        self.job = job
        self.model_asset = model_asset
        self.yarn_conn_id = yarn_conn_id
        self.approved = approved
        self._hook: YarnHook | None = None

    @property
    def hook(self) -> YarnHook:
        if self._hook is None:
            self._hook = YarnHook(self.yarn_conn_id)
        return self._hook

    def _spec(self, context: Context) -> JobSpec:
        dag = self.get_dag()
        folder = str(Path(dag.fileloc).parent) if dag is not None and dag.fileloc else None
        try:
            spec = JobSpec.from_rendered(dict(self.job), base_dir=folder, defaults={"name": self.task_id})
        except SpecError as exc:
            raise AirflowFailException(f"invalid sweep job, nothing was published: {exc}") from exc
        if not spec.quality_gate.enabled:
            raise AirflowFailException(
                "the sweep's job has no quality_gate.metric: set quality_gate (metric, mode) and "
                "checkpoint.model_dir, as the trials have, so the best trial can be judged"
            )
        return spec

    def execute(self, context: Context) -> dict[str, Any]:
        spec = self._spec(context)
        rule = spec.quality_gate
        assert rule.metric is not None  # quality_gate.enabled
        ranking = rank(list(self.trials or []), rule.metric, rule.mode)
        for trial in ranking.out:
            self.log.info("trial %s (%s): not a candidate: %s", trial.name, trial.application_id or "-", trial.out)
        if ranking.best is None:
            raise AirflowFailException(f"no trial of the sweep can be published ({len(ranking.out)} trial(s) out)")
        best = ranking.best
        self.log.info("best trial: %s (%s) with %s=%g", best.name, best.application_id, rule.metric, best.value)
        # The trial's own checkpoint folder is not in its result: its history in the cluster's folder is noted.
        verdict, history_error = judged(
            self.hook, spec, best.application_id, checkpoint_dir=None, approved=self.approved
        )
        if history_error is not None:
            self.log.warning("could not add the gate's verdict to the best trial's history: %s", history_error)
        context["ti"].xcom_push(key=XCOM_QUALITY_GATE, value=verdict.to_dict())
        value: dict[str, Any] = {
            "application_id": best.application_id,
            "best": best.to_dict(),
            "candidates": [t.to_dict() for t in ranking.candidates],
            "stopped": [t.to_dict() for t in ranking.stopped],
            "out": [t.to_dict() for t in ranking.out],
            "step": None,
            "metrics": {rule.metric: best.value},
        }
        value = outcome.with_verdict(value, verdict, self.log)  # a failed verdict fails the task, not retried
        if verdict.awaiting_approval:
            return value  # held again: nothing published, no event
        for trial in ranking.candidates:
            self.log.info(
                "trial %s stays a candidate at %s (%s=%g)", trial.name, trial.model_dir, rule.metric, trial.value
            )
        if self.model_asset is not None:
            outcome.announce_model(context, self.model_asset, value, self.log)
        return value
