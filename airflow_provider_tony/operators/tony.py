"""``TonyOperator``: run one distributed TensorFlow job on YARN as an Airflow task.

The job is one ``JobSpec`` (passed as a dict, a ``JobSpec`` or a YAML path), so
every job parameter is declared once, in ``runtime/spec.py``, not repeated as
thirty operator arguments. The operator renders it, validates it before
anything is submitted, tags the application with the task's identity, and then
either polls (durable: a restarted worker re-attaches) or defers to
``TonyTrigger`` (the worker slot is freed). It never submits the same job twice
for one task run: an application already running (or already succeeded) with
the same dag_id / task_id / run_id / map_index is re-used.

Beside it in this package: reading and rendering the job (``rendering.py``), the
task run's tags and folders (``identity.py``), ``memory_retry`` (``memory_retry.py``),
and what follows the job's end (``concluding.py``: ``conclusion.conclude`` called once,
told with ``outcome.py``'s XCom result, verdict and failed try).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import Asset, BaseOperator, Context, ResumableJobMixin, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_tony.conclusion import Conclusion
from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.links import (
    XCOM_APPLICATION_ID,
    XCOM_JOB_PAGE_URL,
    XCOM_TENSORBOARD_URL,
    XCOM_TRACKING_URL,
    XCOM_YARN_CONN_ID,
    TensorBoardLink,
    TonyJobLink,
    YarnApplicationLink,
)
from airflow_provider_tony.operators import identity, memory_retry
from airflow_provider_tony.operators.concluding import Concluding
from airflow_provider_tony.operators.identity import safe_component as safe_component
from airflow_provider_tony.operators.identity import tag as _tag
from airflow_provider_tony.operators.memory_retry import OUT_OF_MEMORY as OUT_OF_MEMORY
from airflow_provider_tony.operators.outcome import MAX_STATUS_CHARS as MAX_STATUS_CHARS
from airflow_provider_tony.operators.outcome import XCOM_FAILURE, XCOM_QUALITY_GATE, QualityGateFailed
from airflow_provider_tony.operators.outcome import XCOM_MAX_BYTES as XCOM_MAX_BYTES
from airflow_provider_tony.operators.outcome import XCOM_SUMMARY_DIAGNOSTICS as XCOM_SUMMARY_DIAGNOSTICS
from airflow_provider_tony.operators.outcome import XCOM_SUMMARY_EVENTS as XCOM_SUMMARY_EVENTS
from airflow_provider_tony.operators.outcome import XCOM_SUMMARY_RESTARTS as XCOM_SUMMARY_RESTARTS
from airflow_provider_tony.operators.rendering import JobRendering
from airflow_provider_tony.runtime.constants import TENSORBOARD_ROLE
from airflow_provider_tony.runtime.errors import InputMissing, SpecError, TonyError
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn.follower import AM_UNREACHABLE_TIMEOUT_S, AppReport, TonyEvent


class TonyOperator(JobRendering, Concluding, ResumableJobMixin, BaseOperator):
    """Submit a TonY job to YARN and follow it to the end.

    :param job: the job: a dict in ``JobSpec`` form, a ``JobSpec``, or the path of a JobSpec YAML
        (relative paths, and a relative ``src_dir``, are read from the DAG's folder); a TonY job
        comes in through ``airflow_provider_tony.tony_xml.job_from_tony_xml``. (templated: every string inside)
    :param name: YARN application name; defaults to the job's, else ``<dag_id>.<task_id>``. (templated)
    :param env: extra environment for every role, merged over the job's. (templated)
    :param python: interpreter path or environment archive (``.tar.gz`` local or ``hdfs://``). (templated)
    :param checkpoint_dir: HDFS directory for this task run's checkpoints; default
        ``<connection base_path>/checkpoints/<dag_id>/<task_id>/<run_id>[/map-<i>]``, the same for
        every try, so a retry resumes. (templated)
    :param warm_start_from: HDFS checkpoint directory of another run to start from when this run
        has none yet (e.g. yesterday's). (templated)
    :param yarn_conn_id: the ``tony_yarn`` connection.
    :param poll_interval: seconds between looks at YARN and the AM state.
    :param am_stale_timeout: seconds without a new AM state document while YARN says RUNNING
        before the AM counts as hung (killed, task failed).
    :param am_unreachable_timeout: seconds the RM's proxy may fail to reach the AM before its node
        is looked at; a node the RM reports lost, or whose NodeManager refuses connections, fails
        the try as ``am_node_lost`` (retryable) then, not after ``am_stale_timeout``.
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param fail_fast_on_permanent: a failure the runtime does not mark retryable (the script exiting
        1-127 and not in the job's ``retryable_exit_codes``, the job's deadline) fails the task without
        Airflow retries (``AirflowFailException``), so a bug in user code does not burn every retry;
        retryable ones (exit 75 or a signal's 128-255, a lost task or node, a hung AM, no room in the
        queue, an HDFS outage) are retried. Default True; False retries every failure.
    :param model_asset: an Airflow ``Asset`` (``airflow_provider_tony.assets.model_asset("digits")``) declared as
        an outlet: when the job succeeds and published ``checkpoint.model_dir``, the task emits an event on it
        whose ``extra`` carries ``model_dir``, ``application_id``, ``step`` and ``metrics``, so DAGs scheduled on
        the asset run on each new model.
    :param publish: with a ``quality_gate``, judge and publish the model when the job succeeds (default).
        False keeps it a candidate (``<model_dir>.candidate-<application id>``, named in the XCom's
        ``model_dir`` with ``candidate: true``) for a later task to publish: a sweep's trials, whose best
        ``TonyPublishBestOperator`` publishes once.
    :param durable: re-attach to the running application after a worker restart or a retry.
    """

    template_fields: Sequence[str] = ("job", "name", "env", "python", "checkpoint_dir", "warm_start_from")
    template_fields_renderers = {"job": "json", "env": "json"}
    # No template_ext: job="training/x.yaml" is parsed as YAML first and then each of its string
    # values rendered (``_render_job``), so a template changes values, never keys or structure.
    template_ext: Sequence[str] = ()
    operator_extra_links = (TonyJobLink(), YarnApplicationLink(), TensorBoardLink())
    external_id_key = "yarn_application_id"
    ui_color = "#ffcc80"

    def __init__(
        self,
        *,
        job: JobSpec | dict[str, Any] | str,
        name: str | None = None,
        env: dict[str, str] | None = None,
        python: str | None = None,
        checkpoint_dir: str | None = None,
        warm_start_from: str | None = None,
        yarn_conn_id: str = YarnHook.default_conn_name,
        poll_interval: float = 5.0,
        am_stale_timeout: float = 120.0,
        am_unreachable_timeout: float = AM_UNREACHABLE_TIMEOUT_S,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        fail_fast_on_permanent: bool = True,
        model_asset: Asset | None = None,
        publish: bool = True,
        **kwargs: Any,
    ) -> None:
        if model_asset is not None:
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), model_asset]
        super().__init__(**kwargs)
        self.model_asset = model_asset
        self.publish = publish
        self.job = job.to_dict() if isinstance(job, JobSpec) else job
        # The path as given: rendering replaces ``job`` by the file's rendered text.
        self._job_file = job if isinstance(job, str) and job.endswith(tuple(self.job_file_suffixes)) else None
        self.name = name
        self.env = env
        self.python = python
        self.checkpoint_dir = checkpoint_dir
        self.warm_start_from = warm_start_from
        self.yarn_conn_id = yarn_conn_id
        self.poll_interval = poll_interval
        self.am_stale_timeout = am_stale_timeout
        self.am_unreachable_timeout = am_unreachable_timeout
        self.deferrable = deferrable
        self.fail_fast_on_permanent = fail_fast_on_permanent
        self._hook: YarnHook | None = None
        self._app_id: str | None = None
        self._spec: JobSpec | None = None
        self._conclusion: Conclusion | None = None  # concluded once (``Concluding._concluded``)
        self._told: dict[str, Any] | None = None
        self._tensorboard_url = ""

    @property
    def hook(self) -> YarnHook:
        if self._hook is None:
            self._hook = YarnHook(self.yarn_conn_id)
        return self._hook

    # ------------------------------------------------------------ the spec

    def identity_tags(self, context: Context) -> list[str]:
        """What a retry or a restarted worker matches on (never the try number)."""
        return identity.identity_tags(context["ti"])

    def _dag_folder(self) -> str | None:
        """The DAG file's folder, where a relative ``src_dir`` is read from (None outside a DAG)."""
        dag = self.get_dag()
        return str(Path(dag.fileloc).parent) if dag is not None and dag.fileloc else None

    def build_spec(self, context: Context) -> JobSpec:
        """Render-time values become a validated JobSpec (no cluster contact yet)."""
        ti = context["ti"]
        spec = JobSpec.from_rendered(
            self._job_dict(),
            base_dir=self._dag_folder(),
            defaults={"name": f"{ti.dag_id}.{ti.task_id}", "queue": self.hook.default_queue},
        )
        spec = spec.with_overrides(
            name=self.name,
            env=self.env,
            python=self.python,
            tags=["tony"],
            checkpoint_dir=self.checkpoint_dir or spec.checkpoint.dir or self.default_checkpoint_dir(context),
            warm_start_from=self.warm_start_from,
        )
        if spec.memory_retry.enabled and int(getattr(ti, "try_number", 1) or 1) > 1:
            spec = self._memory_grown(spec, context)
        return spec

    def _memory_grown(self, spec: JobSpec, context: Context) -> JobSpec:
        """``memory_retry``: after the previous try's container was killed for memory, this try asks for more.

        The previous try is this task run's newest failed application (found by
        its identity tags); its failure comes from the AM's stored history, so it
        holds the request that was killed (already grown by an earlier retry) and
        the role to grow. Anything else (another failure, no history) submits the
        job as written.
        """
        try:
            apps = self.hook.find_by_tags(self.identity_tags(context), active_only=False)
            previous = next((a for a in apps if not a.active and a.final_status == "FAILED"), None)
            failure = self.ended_result(previous.app_id).failure if previous is not None else None
        except TonyError as exc:
            self.log.warning("memory_retry: could not read the previous try's failure (%s); asking as written", exc)
            return spec
        return memory_retry.grown(spec, failure, previous.app_id if previous else "", self.log.warning)

    def default_checkpoint_dir(self, context: Context) -> str:
        """Stable across the tries of one task run (HDFS names allow no ':')."""
        return identity.checkpoint_dir(self.hook.base_path, context["ti"])

    # ------------------------------------------------------------ submit / re-attach

    def _existing(self, context: Context) -> AppReport | None:
        """This task run's application if one is running or has succeeded."""
        apps = self.hook.find_by_tags(self.identity_tags(context), active_only=False)
        for app in apps:  # newest first
            if app.active:
                return app
        if apps and apps[0].state == "FINISHED" and apps[0].final_status == "SUCCEEDED":
            return apps[0]
        return None

    def submit_job(self, context: Context) -> str:
        spec = self._spec or self.build_spec(context)
        existing = self._existing(context)
        if existing is not None:
            self.log.info(
                "re-attaching to %s (%s), submitted for this task run earlier; not submitting again",
                existing.app_id,
                existing.state,
            )
            app_id = existing.app_id
        else:
            ti = context["ti"]
            try:
                tagged = spec.with_overrides(tags=[*self.identity_tags(context), _tag("tony-try", ti.try_number)])
                app_id = self.hook.submit(tagged, attempt=int(ti.try_number or 1))
            except InputMissing as exc:  # a late partition: retried or not as the input says
                raise (AirflowException if exc.retryable else AirflowFailException)(str(exc)) from exc
            except SpecError as exc:
                raise AirflowFailException(f"invalid job, nothing was submitted: {exc}") from exc
            self.log.info("submitted %s (%s)", app_id, spec.name)
        self._on_app(app_id, context)
        return app_id

    def _on_app(self, app_id: str, context: Context) -> None:
        self._app_id = app_id
        url = self.hook.tracking_url(app_id)
        context["ti"].xcom_push(key=XCOM_TRACKING_URL, value=url)
        page = self.hook.job_page_url(app_id)
        context["ti"].xcom_push(key=XCOM_JOB_PAGE_URL, value=page)
        self.log.info("TonY job page: %s", page)
        context["ti"].xcom_push(key=XCOM_APPLICATION_ID, value=app_id)
        # The Airflow UI's "TonY job" view (plugins/job_view_app.py) reads the job through this connection.
        context["ti"].xcom_push(key=XCOM_YARN_CONN_ID, value=self.yarn_conn_id)
        # A deferred task cannot write XCom while the trigger follows the job, and the page's
        # address is known now: link it at once (it answers once the role serves).
        tensorboard = self._spec is not None and TENSORBOARD_ROLE in self._spec.roles
        self._tensorboard_url = self.hook.tensorboard_page_url(app_id) if tensorboard else ""
        context["ti"].xcom_push(key=XCOM_TENSORBOARD_URL, value=self._tensorboard_url)
        self.log.info("YARN application page: %s", url)

    def _on_state(self, context: Context, doc: StateDocument | None) -> None:
        url = self.hook.tensorboard_url(self._app_id, doc) if self._app_id else ""
        if url and url != self._tensorboard_url:
            self._tensorboard_url = url
            context["ti"].xcom_push(key=XCOM_TENSORBOARD_URL, value=url)
            self.log.info("TensorBoard: %s", url)

    # ------------------------------------------------------------ ResumableJobMixin

    def get_job_status(self, external_id: Any, context: Context) -> str:
        rep = self.hook.report(str(external_id))
        if rep.active:
            return "RUNNING"
        return "SUCCEEDED" if rep.final_status == "SUCCEEDED" else "FAILED"

    def is_job_active(self, status: str) -> bool:
        return status == "RUNNING"

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    # The mixin declares None but returns whatever this returned on reconnect: that is the XCom.
    def poll_until_complete(self, external_id: Any, context: Context) -> dict[str, Any]:  # type: ignore[override]
        """Follow to the end; returns the XCom result (the mixin returns it as is on reconnect)."""
        app_id = str(external_id)
        if self._app_id != app_id:
            self._on_app(app_id, context)
        spec = self._spec
        try:
            result = self.hook.wait(
                app_id,
                poll_interval=self.poll_interval,
                am_stale_timeout=self.am_stale_timeout,
                am_unreachable_timeout=self.am_unreachable_timeout,
                startup_timeout=spec.startup_timeout if spec else 600.0,
                emit=self.log.info,
                on_state=lambda doc: self._on_state(context, doc),
            )
        except BaseException:
            # execution_timeout, SIGTERM, a lost RM connection: the job must not outlive the task.
            self._kill_quietly(app_id)
            raise
        return self._concluded(result, context)

    def get_job_result(self, external_id: Any, context: Context) -> dict[str, Any]:
        app_id = str(external_id)
        if self._told is not None and self._told["application_id"] == app_id:  # just polled: told once
            return self._told
        # Re-used an application that had already succeeded: its AM is gone, but the
        # history it left on HDFS keeps the tasks and metrics for the XCom.
        if self._app_id != app_id:
            self._on_app(app_id, context)
        return self._concluded(self.ended_result(app_id), context)

    # ------------------------------------------------------------ entry points

    def execute(self, context: Context) -> Any:
        try:
            self._spec = self.build_spec(context)
        except SpecError as exc:
            raise AirflowFailException(f"invalid job, nothing was submitted: {exc}") from exc
        if not self.deferrable:
            return self.execute_resumable(context)
        app_id = self.submit_job(context)
        self.defer(
            trigger=TonyTrigger(
                app_id=app_id,
                yarn_conn_id=self.yarn_conn_id,
                poll_interval=self.poll_interval,
                startup_timeout=self._spec.startup_timeout,
                am_stale_timeout=self.am_stale_timeout,
                am_unreachable_timeout=self.am_unreachable_timeout,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        try:
            done = TonyEvent.from_dict(event, "event")
        except SpecError as exc:  # never success: the try fails (retryable) and on_kill still knows the app
            self._app_id = str(event.get("app_id") or self._app_id or "") or None
            raise AirflowException(f"lost track of {self._app_id}: the trigger's event is unreadable ({exc})") from exc
        self._app_id = done.app_id
        if done.status != TonyEvent.DONE or done.result is None:
            raise AirflowException(f"lost track of {self._app_id}: {done.message}")
        result = done.result
        if self._spec is None:
            # A fresh operator after the deferral: rebuild the spec (no cluster contact) so the
            # result names checkpoint_dir, model_dir and the deciding task's step and metrics, as
            # the polling mode's does.
            try:
                self._spec = self.build_spec(context)
            except Exception as exc:  # noqa: BLE001 - describing the result must not change the outcome
                self.log.warning("could not rebuild the job to describe its result: %s", exc)
        self._on_state(context, result.am_state)
        return self._concluded(result, context)

    def on_kill(self) -> None:
        if self._app_id:
            self._kill_quietly(self._app_id)

    def _kill_quietly(self, app_id: str) -> None:
        try:
            self.hook.kill(app_id)
            self.log.info("killed YARN application %s", app_id)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            self.log.warning("could not kill %s: %s", app_id, exc)


__all__ = ["XCOM_FAILURE", "XCOM_QUALITY_GATE", "XCOM_TENSORBOARD_URL", "QualityGateFailed", "TonyOperator"]
