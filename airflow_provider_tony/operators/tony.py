"""``TonyOperator``: run one distributed TensorFlow job on YARN as an Airflow task.

The job is one ``JobSpec`` (passed as a dict, a ``JobSpec`` or a YAML path), so
every job parameter is declared once, in ``runtime/spec.py``, not repeated as
thirty operator arguments. The operator renders it, validates it before
anything is submitted, tags the application with the task's identity, and then
either polls (durable: a restarted worker re-attaches) or defers to
``TonyTrigger`` (the worker slot is freed). It never submits the same job twice
for one task run: an application already running (or already succeeded) with
the same dag_id / task_id / run_id / map_index is re-used.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import Asset, BaseOperator, Context, ResumableJobMixin, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.links import (
    XCOM_JOB_PAGE_URL,
    XCOM_TENSORBOARD_URL,
    XCOM_TRACKING_URL,
    TensorBoardLink,
    TonyJobLink,
    YarnApplicationLink,
)
from airflow_provider_tony.runtime import gate
from airflow_provider_tony.runtime.constants import TENSORBOARD_ROLE
from airflow_provider_tony.runtime.errors import InputMissing, JobFileError, SpecError, TonyError
from airflow_provider_tony.runtime.history import history_paths
from airflow_provider_tony.runtime.messages import MAX_DIAGNOSTICS_CHARS, GateResult, StateDocument
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.spec import shown as shown_value
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn.follower import AM_UNREACHABLE_TIMEOUT_S, AppReport, JobResult, TonyEvent
from airflow_provider_tony.yarn.logformat import log_groups, shown
from airflow_provider_tony.yarn.source import paths_beside_job_file

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
#: ``Failure.kind`` of a container YARN killed for its memory (``runtime.failure.FailureKind.OUT_OF_MEMORY``).
OUT_OF_MEMORY = "out_of_memory"


class QualityGateFailed(AirflowFailException, TonyError):
    """The job trained, but its model is worse than the published one: not published, not retried.

    A retry would train on the same data and judge the same way; the figures
    are in the message, in the ``quality_gate`` XCom and on the job page.
    """

    def __init__(self, message: str, result: GateResult) -> None:
        super().__init__(message)
        self.result = result


def _tag(prefix: str, value: object) -> str:
    """A YARN tag (lower-cased by YARN, at most 100 chars, no commas)."""
    text = f"{prefix}:{value}".lower().replace(",", "_")
    if len(text) > 100:
        text = f"{prefix}:sha1-{hashlib.sha1(str(value).encode(), usedforsecurity=False).hexdigest()}"
    return text


def safe_component(value: object) -> str:
    """One HDFS folder name from a dag id, task id or run id (HDFS names allow no ':').

    Characters outside ``A-Za-z0-9._-`` become ``_``; a name of dots only
    (Airflow's run-id pattern allows a run id ``.`` or ``..``) becomes
    ``~dots-<n>``, which no other id maps to (``~`` is never left by the first rule),
    so the folder stays the run's own and never its parent's.
    """
    text = re.sub(r"[^A-Za-z0-9._-]", "_", str(value))
    if text.strip(".") == "":
        return f"~dots-{len(text)}"
    return text


class TonyOperator(ResumableJobMixin, BaseOperator):
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
    :param durable: re-attach to the running application after a worker restart or a retry.
    """

    template_fields: Sequence[str] = ("job", "name", "env", "python", "checkpoint_dir", "warm_start_from")
    template_fields_renderers = {"job": "json", "env": "json"}
    # No template_ext: job="training/x.yaml" is parsed as YAML first and then each of its string
    # values rendered (``_render_job``), so a template changes values, never keys or structure.
    template_ext: Sequence[str] = ()
    #: What a ``job`` string must end with to be read as a job file.
    job_file_suffixes: Sequence[str] = (".yaml", ".yml")
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
        **kwargs: Any,
    ) -> None:
        if model_asset is not None:
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), model_asset]
        super().__init__(**kwargs)
        self.model_asset = model_asset
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
        self._result: JobResult | None = None
        self._gate: GateResult | None = None
        #: What the polling path returned: the mixin then asks ``get_job_result`` for the same value.
        self._final: dict[str, Any] | None = None
        self._pruned = False
        self._tensorboard_url = ""

    @property
    def hook(self) -> YarnHook:
        if self._hook is None:
            self._hook = YarnHook(self.yarn_conn_id)
        return self._hook

    # ------------------------------------------------------------ the spec

    def _job_file_path(self) -> Path:
        """Where ``job="x.yaml"`` lives: as given, else beside the DAG file or in ``template_searchpath``."""
        path = Path(str(self._job_file))
        if path.is_absolute():
            return path
        folders = [Path(self.dag.fileloc).parent] if self.dag and self.dag.fileloc else []
        searchpath = getattr(self.dag, "template_searchpath", None) or []
        folders += [Path(p) for p in ([searchpath] if isinstance(searchpath, str) else searchpath)]
        return next((f / path for f in folders if (f / path).is_file()), folders[0] / path if folders else path)

    def _read_job_file(self) -> dict[str, Any]:
        """The job file's mapping, read as ``tony`` reads it (``jobfile.py``), not yet rendered.

        A file that is missing or not a job fails the task at once (no retry can
        fix it) and says where it was looked for, or where in the file the fault is.
        """
        from airflow_provider_tony.jobfile import read_job_file

        path = self._job_file_path()
        try:
            return read_job_file(path, shown_as=self._job_file, templated=True)
        except OSError as exc:
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {self._job_file!r} not found (looked beside the DAG file "
                f"and in template_searchpath, from {path.parent}); give the file's path relative to the DAG file, "
                f"or an absolute one ({type(exc).__name__})"
            ) from exc
        except JobFileError as exc:
            raise AirflowFailException(f"invalid job, nothing was submitted: job: {exc}") from exc

    def _job_dict(self) -> dict[str, Any]:
        if isinstance(self.job, str):
            if self._job_file is None or self.job != self._job_file:
                raise SpecError(
                    "job",
                    f"{self.job[:80]!r} is not a JobSpec dict nor a path ending in "
                    f"{' or '.join(self.job_file_suffixes)}; give one of them",
                )
            data = self._read_job_file()  # not rendered (execute called directly): as it is
        elif isinstance(self.job, dict):
            data = copy.deepcopy(self.job)
        else:
            raise SpecError("job", f"{type(self.job).__name__} is not a JobSpec, dict or YAML path")
        if self._job_file is not None:
            return dict(paths_beside_job_file(data, self._job_file_path().parent))
        return data

    def render_template(
        self, content: Any, context: Context, jinja_env: Any = None, seen_oids: set[int] | None = None
    ) -> Any:
        """``job`` (a job file, parsed first, or a dict) renders value by value (``_render_job``).

        Every other field renders as Airflow renders it, and so does a value Airflow
        marked as not to render (``seen_oids``: a mapped value resolved from an XCom is data).
        """
        if seen_oids is not None and id(content) in seen_oids:
            return content
        if isinstance(content, str) and self._job_file is not None and content == self._job_file:
            return self._render_job(self._read_job_file(), context, jinja_env or self.get_template_env(), "")
        if isinstance(content, dict) and content is self.job:
            return self._render_job(content, context, jinja_env or self.get_template_env(), "")
        return super().render_template(content, context, jinja_env, seen_oids)

    def _render_job(self, value: Any, context: Context, jinja_env: Any, where: str) -> Any:
        """Each string of the parsed job rendered on its own, by Airflow's Jinja environment.

        Keys are never rendered, and a rendered value stays one value: text that
        looks like YAML (``x\nqueue: production``) is a string of the field it
        landed in, and the JobSpec's validation judges it there (a number
        spelled as text becomes a number, ``numbers_from_text``). Under
        ``render_template_as_native_obj`` a template that renders to a list or a
        mapping is refused: it would change the job's structure.
        """
        import jinja2

        if isinstance(value, dict):
            return {
                k: self._render_job(v, context, jinja_env, f"{where}.{k}" if where else str(k))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._render_job(v, context, jinja_env, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, str):
            return value
        try:
            rendered = self._render(jinja_env.from_string(value), context)
        except jinja2.TemplateSyntaxError as exc:
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {where}: {shown_value(value)} is not a valid Jinja template "
                f"(line {exc.lineno}: {exc.message}); fix the template"
            ) from exc
        if rendered is not None and not isinstance(rendered, (str, int, float, bool)):
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {where}: the template {shown_value(value)} rendered to a "
                f"{type(rendered).__name__}; a template may give a field its value, never add structure to the job"
            )
        return rendered

    def identity_tags(self, context: Context) -> list[str]:
        """What a retry or a restarted worker matches on (never the try number)."""
        ti = context["ti"]
        return [
            _tag("tony-dag", ti.dag_id),
            _tag("tony-task", ti.task_id),
            _tag("tony-run", ti.run_id),
            _tag("tony-map", getattr(ti, "map_index", -1)),
        ]

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
        if previous is None or failure is None or failure.kind != OUT_OF_MEMORY:
            return spec
        role = (failure.fix_field or "").removeprefix("roles.").removesuffix(".memory")
        killed = failure.requested_mib
        grown = spec.memory_retry.next_request(killed) if killed else None
        if role not in spec.roles or grown is None or grown <= spec.roles[role].memory:
            return spec
        self.log.warning(
            "memory_retry: %s was killed for memory in %s (peak %s MiB of %s MiB requested); this try asks for "
            "roles.%s.memory = %d MiB (factor %g, max %d MiB)",
            failure.task_id,
            previous.app_id,
            failure.peak_mib,
            killed,
            role,
            grown,
            spec.memory_retry.factor,
            spec.memory_retry.max,
        )
        return spec.with_memory(role, grown)

    def default_checkpoint_dir(self, context: Context) -> str:
        """Stable across the tries of one task run (HDFS names allow no ':')."""
        ti = context["ti"]
        parts = [ti.dag_id, ti.task_id, ti.run_id]
        if getattr(ti, "map_index", -1) not in (None, -1):
            parts.append(f"map-{ti.map_index}")
        safe = [safe_component(p) for p in parts]
        return "/".join([self.hook.base_path.rstrip("/"), "checkpoints", *safe])

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
        context["ti"].xcom_push(key="application_id", value=app_id)
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
        self._finish(result, context)
        self._final = self._announce(context, self._judged(context, self.xcom_result(result)))
        return self._final

    def get_job_result(self, external_id: Any, context: Context) -> dict[str, Any]:
        app_id = str(external_id)
        if self._result is not None and self._result.app_id == app_id:  # just polled: already logged
            if self._final is not None:  # and judged and announced: once is enough (the log said so)
                return self._final
            return self._announce(context, self._judged(context, self._xcom_result(self._result)))
        # Re-used an application that had already succeeded: its AM is gone, but the
        # history it left on HDFS keeps the tasks and metrics for the XCom.
        if self._app_id != app_id:
            self._on_app(app_id, context)
        self._result = self.ended_result(app_id)
        return self._announce(context, self._judged(context, self.xcom_result(self._result)))

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
        self._finish(result, context)
        return self._announce(context, self._judged(context, self.xcom_result(result)))

    def on_kill(self) -> None:
        if self._app_id:
            self._kill_quietly(self._app_id)

    # ------------------------------------------------------------ outcome

    def _kill_quietly(self, app_id: str) -> None:
        try:
            self.hook.kill(app_id)
            self.log.info("killed YARN application %s", app_id)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            self.log.warning("could not kill %s: %s", app_id, exc)

    def _finish(self, result: JobResult, context: Context | None = None) -> None:
        self._result = result
        if result.cost is None or not result.cost.final:  # the ending report undercounts (see final_cost)
            try:
                result.cost = self.hook.final_cost(result.app_id) or result.cost
            except Exception as exc:  # noqa: BLE001 - the cost is a report: it must not change the outcome
                self.log.warning("no final cost for %s: %s", result.app_id, exc)
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
        self._copy_failed_logs(result)
        message = (
            f"TonY job {result.app_id} {shown(result.final_status, MAX_STATUS_CHARS)}: "
            f"{shown(result.diagnostics, MAX_DIAGNOSTICS_CHARS)}\n"
            f"Logs: yarn logs -applicationId {result.app_id}"
        )
        failure = result.failure
        if context is not None and failure is not None:
            context["ti"].xcom_push(key=XCOM_FAILURE, value=failure.to_dict())
        if failure is not None and failure.kind == OUT_OF_MEMORY:
            message += "\n" + self._memory_advice(failure.fix_field, failure.requested_mib)
            if self._memory_retry_left(failure.requested_mib):
                raise AirflowException(message)
        if self.fail_fast_on_permanent and not result.retryable:
            raise AirflowFailException(
                f"{message}\nNot retried: a retry would fail the same way (see the "
                "failure classification in the README; list an exit code in the job's "
                "retryable_exit_codes to retry it)"
            )
        raise AirflowException(message)

    def _memory_retry_left(self, requested_mib: int | None) -> bool:
        spec = self._spec
        return (
            spec is not None and requested_mib is not None and spec.memory_retry.next_request(requested_mib) is not None
        )

    def _memory_advice(self, fix_field: str | None, requested_mib: int | None) -> str:
        """What an out-of-memory failure's message ends with: the field to raise, or what the retry asks for."""
        field_ = fix_field or "the role's memory"
        spec = self._spec
        if spec is None or not spec.memory_retry.enabled or requested_mib is None:
            return (
                f"Out of memory: raise {field_} (it asked for {requested_mib} MiB), or set memory_retry "
                "(factor, max) for the next try to ask for more"
            )
        grown = spec.memory_retry.next_request(requested_mib)
        if grown is None:
            return (
                f"Out of memory at memory_retry.max ({spec.memory_retry.max} MiB): not retried; raise {field_} "
                "and memory_retry.max, or lower the job's memory use"
            )
        return f"Out of memory: retried by memory_retry, the next try asks for {field_} = {grown} MiB"

    def _copy_failed_logs(self, result: JobResult) -> None:
        """Copy the failed containers' logs into the task log, where the cluster serves them."""
        tasks = result.am_state.tasks if result.am_state is not None else {}
        for task_id, task in sorted(tasks.items()):
            if not task.failed or not task.container_id:
                continue
            try:
                logs = self.hook.container_logs(task.container_id, task.host or "")
            except Exception as exc:  # noqa: BLE001 - the diagnostics above already say what failed
                self.log.warning("could not fetch the logs of %s: %s", task_id, exc)
                continue
            for name, text in logs.items():  # folded: Airflow's log view collapses ::group:: sections
                for line in log_groups(f"{task_id} {name} ({task.container_id})", text):
                    self.log.info("%s", line)

    def _prune_runs(self, context: Any) -> None:
        """The job's ``retention``: this task's older runs' checkpoint folders, after a run succeeded.

        Best effort: pruning failing leaves a warning, never a failed task.
        """
        spec = self._spec
        if spec is None or self._pruned or not (spec.retention.max_age_days or spec.retention.keep_runs):
            return
        self._pruned = True  # the mixin asks for the result twice: prune once
        from airflow_provider_tony import retention

        ti = context["ti"]
        task_folder = self.default_checkpoint_dir(context)
        for _ in range(2 if getattr(ti, "map_index", -1) not in (None, -1) else 1):
            task_folder = task_folder.rsplit("/", 1)[0]  # <run>[/map-i] -> the task's folder
        policy = retention.Policy(spec.retention.max_age_days, spec.retention.keep_runs)
        try:
            hdfs = self.hook.hdfs()
            protect = [d for d in (spec.checkpoint.dir, spec.checkpoint.model_dir) if d]
            # Every running application's folders stay, not only this run's: an older run of this task
            # beyond keep_runs may still be training (a manual run, a backfill).
            running = [app.tags for app in self.hook.find_by_tags([])]
            active = retention.active_folders(self.hook.base_path, running)
            items = retention.scan_task(hdfs, task_folder, protect, active)
            removals = retention.plan(items, policy, wall_now=time.time())
            for item, why in removals:
                self.log.info("retention: removing %s (%s)", item.path, why)
            retention.remove(hdfs, removals)
        except Exception as exc:  # noqa: BLE001 - housekeeping must not fail a trained job
            self.log.warning("retention: could not prune %s: %s", task_folder, exc)

    def _judged(self, context: Any, value: dict[str, Any]) -> dict[str, Any]:
        """The quality gate, for a succeeded job that has one: publish its model or fail the task.

        Judged once per operator (the mixin asks for the result twice); judging
        again after a worker restart is safe (``gate.apply`` moves nothing twice).
        An HDFS error while judging fails the try as retryable: the retry
        re-attaches to the succeeded application and judges again.
        """
        spec = self._spec
        if spec is None or not spec.quality_gate.enabled or value.get("final_state") != "SUCCEEDED":
            return value
        app_id = str(value["application_id"])
        if self._gate is None:
            try:
                hdfs = self.hook.hdfs_for(spec)  # the model's folders on model_dir's NameNode
                self._gate = gate.apply(hdfs, spec, app_id)
            except Exception as exc:  # noqa: BLE001 - HDFS trouble: retried, the model stays a candidate
                raise AirflowException(f"quality gate of {app_id} not decided: {type(exc).__name__}: {exc}") from exc
            try:
                paths = history_paths(app_id, spec.checkpoint.dir, self.hook.history_dir)
                gate.annotate_history(hdfs, paths, self._gate)
            except Exception as exc:  # noqa: BLE001 - the page misses the verdict; the outcome stands
                self.log.warning("could not add the gate's verdict to the job's history: %s", exc)
        verdict = self._gate
        value = {**value, XCOM_QUALITY_GATE: verdict.to_dict(), "model_dir": verdict.model_dir}
        context["ti"].xcom_push(key=XCOM_QUALITY_GATE, value=verdict.to_dict())
        figures = f"{verdict.metric}: this run {verdict.value}, published model {verdict.previous}"
        if verdict.passed:
            self.log.info("quality gate passed (%s): %s", figures, verdict.reason)
            return value
        self.log.error(
            "quality gate FAILED (%s): %s; the model stays at %s", figures, verdict.reason, verdict.model_dir
        )
        raise QualityGateFailed(
            f"quality gate failed for {app_id}: {verdict.reason}. The model was not published (it stays at "
            f"{verdict.model_dir}); not retried: a retry would train and judge the same way",
            verdict,
        )

    def _announce(self, context: Context, value: dict[str, Any]) -> dict[str, Any]:
        """A succeeded job that published a model: the model asset's event says where it is."""
        if value.get("final_state") == "SUCCEEDED":
            self._prune_runs(context)
        if self.model_asset is not None and value.get("final_state") == "SUCCEEDED" and value.get("model_dir"):
            context["outlet_events"][self.model_asset].extra = {
                "model_dir": value["model_dir"],
                "application_id": value["application_id"],
                "step": value["step"],
                "metrics": value["metrics"],
                **({XCOM_QUALITY_GATE: value[XCOM_QUALITY_GATE]} if XCOM_QUALITY_GATE in value else {}),
            }
            self.log.info("model %s published: asset %s", value["model_dir"], self.model_asset.uri)
        return value

    # ------------------------------------------------------------ OpenLineage

    def _lineage_namespace(self) -> str:
        """The datasets' namespace: the cluster's ``fs.defaultFS`` (``hdfs://namenode:8020``), else ``hdfs``."""
        try:
            return self.hook.default_fs()
        except Exception:  # noqa: BLE001 - lineage must never fail the task
            return "hdfs"

    def _lineage(self, *, complete: bool) -> Any:
        from airflow_provider_tony.lineage import operator_lineage

        result = self._xcom_result(self._result) if self._result is not None else None
        verdict = self._gate.to_dict() if self._gate is not None else None
        published = complete and (self._gate is None or self._gate.passed)
        return operator_lineage(self._spec, self._lineage_namespace(), result, verdict, model_published=published)

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
        """The XCom, within ``XCOM_MAX_BYTES`` whatever the job's containers wrote: past it,
        per-task details become counts and the lists keep their newest entries."""
        value = self._full_xcom_result(result)
        if len(json.dumps(value, default=str)) <= XCOM_MAX_BYTES:
            return value
        tasks = value["tasks"]
        value["tasks"] = {"count": len(tasks), "by_state": dict(Counter(str(t["state"]) for t in tasks.values()))}
        value["events"] = value["events"][-XCOM_SUMMARY_EVENTS:]
        value["restarts"] = value["restarts"][-XCOM_SUMMARY_RESTARTS:]
        value["diagnostics"] = value["diagnostics"][:XCOM_SUMMARY_DIAGNOSTICS]
        if len(json.dumps(value, default=str)) > XCOM_MAX_BYTES:
            value["metrics"], value["events"], value["restarts"] = {}, [], []
        self.log.warning("the job's result was too large for an XCom: per-task details are summarised")
        return value

    def _full_xcom_result(self, result: JobResult) -> dict[str, Any]:
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
        decider = state.task(self._spec.decider_task()) if self._spec is not None else None
        progress = decider.progress if decider is not None else None
        spec = self._spec
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
            "checkpoint_dir": spec.checkpoint.dir if spec else None,
            "model_dir": spec.checkpoint.model_dir if spec else None,
            # Resource-seconds from the RM's final report: what the run cost (None: YARN had forgotten it).
            "cost": result.cost.to_dict() if result.cost is not None else None,
        }


__all__ = ["XCOM_FAILURE", "XCOM_QUALITY_GATE", "XCOM_TENSORBOARD_URL", "QualityGateFailed", "TonyOperator"]
