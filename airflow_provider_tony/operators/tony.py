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
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator, conf
from airflow.sdk.bases.resumablejobmixin import ResumableJobMixin
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
from airflow_provider_tony.runtime.errors import SpecError, TonyError
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.runtime.spec import ARCHIVE_SUFFIXES, JobSpec
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn.follower import AppReport, JobResult, TonyEvent

INT_ROLE_FIELDS = ("instances", "vcores", "gpus")


def _tag(prefix: str, value: object) -> str:
    """A YARN tag (lower-cased by YARN, at most 100 chars, no commas)."""
    text = f"{prefix}:{value}".lower().replace(",", "_")
    if len(text) > 100:
        text = f"{prefix}:sha1-{hashlib.sha1(str(value).encode(), usedforsecurity=False).hexdigest()}"
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
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param fail_fast_on_permanent: when True, a failure the runtime does not mark retryable (user code
        exiting 1-127, the job's deadline) fails the task without Airflow retries, as Kubeflow's
        exit-code restart policy does; retryable ones (exit 75/137/143, a lost task or node, a hung
        AM, no room in the queue) are retried. Default False: every failure is retried.
    :param durable: re-attach to the running application after a worker restart or a retry.
    """

    template_fields: Sequence[str] = ("job", "name", "env", "python", "checkpoint_dir", "warm_start_from")
    template_fields_renderers = {"job": "json", "env": "json"}
    operator_extra_links = (TonyJobLink(), YarnApplicationLink(), TensorBoardLink())
    external_id_key = "yarn_application_id"
    ui_color = "#ffcc80"

    def __init__(self, *, job: JobSpec | dict[str, Any] | str, name: str | None = None,
                 env: dict[str, str] | None = None, python: str | None = None,
                 checkpoint_dir: str | None = None, warm_start_from: str | None = None,
                 yarn_conn_id: str = YarnHook.default_conn_name, poll_interval: float = 5.0,
                 am_stale_timeout: float = 120.0,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 fail_fast_on_permanent: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job.to_dict() if isinstance(job, JobSpec) else job
        self.name = name
        self.env = env
        self.python = python
        self.checkpoint_dir = checkpoint_dir
        self.warm_start_from = warm_start_from
        self.yarn_conn_id = yarn_conn_id
        self.poll_interval = poll_interval
        self.am_stale_timeout = am_stale_timeout
        self.deferrable = deferrable
        self.fail_fast_on_permanent = fail_fast_on_permanent
        self._hook: YarnHook | None = None
        self._app_id: str | None = None
        self._spec: JobSpec | None = None
        self._result: JobResult | None = None
        self._tensorboard_url = ""

    @property
    def hook(self) -> YarnHook:
        if self._hook is None:
            self._hook = YarnHook(self.yarn_conn_id)
        return self._hook

    # ------------------------------------------------------------ the spec

    def _job_dict(self) -> dict[str, Any]:
        if isinstance(self.job, str):
            import yaml  # noqa: PLC0415

            path = Path(self.job)
            if not path.is_absolute() and self.dag and self.dag.fileloc:
                path = Path(self.dag.fileloc).parent / path
            try:
                data = yaml.safe_load(path.read_text())
            except OSError as exc:
                raise SpecError("job", f"{self.job!r} could not be read ({exc}); give a JobSpec dict "
                                "or the path of a JobSpec YAML") from exc
            src_dir = data.get("src_dir") if isinstance(data, dict) else None
            if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")):
                data["src_dir"] = str((path.parent / src_dir).resolve())  # beside the YAML, as the CLI reads it
            return data
        if not isinstance(self.job, dict):
            raise SpecError("job", f"{type(self.job).__name__} is not a JobSpec, dict or YAML path")
        return copy.deepcopy(self.job)

    def identity_tags(self, context: Any) -> list[str]:
        """What a retry or a restarted worker matches on (never the try number)."""
        ti = context["ti"]
        return [_tag("tony-dag", ti.dag_id), _tag("tony-task", ti.task_id), _tag("tony-run", ti.run_id),
                _tag("tony-map", getattr(ti, "map_index", -1))]

    def build_spec(self, context: Any) -> JobSpec:
        """Render-time values become a validated JobSpec (no cluster contact yet)."""
        data = self._job_dict()
        ti = context["ti"]
        src_dir = data.get("src_dir")
        if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")) and self.dag \
                and self.dag.fileloc:
            data["src_dir"] = str((Path(self.dag.fileloc).parent / src_dir).resolve())
        data["name"] = self.name or data.get("name") or f"{ti.dag_id}.{ti.task_id}"
        data.setdefault("queue", self.hook.default_queue)
        if self.env:
            data["env"] = {**(data.get("env") or {}), **self.env}
        if self.python:
            key = "archive" if self.python.endswith(ARCHIVE_SUFFIXES) else "interpreter"
            data["python"] = {key: self.python}
        for role in (data.get("roles") or {}).values():
            # Templates render to text: "{{ params.workers }}" arrives as "2".
            for key in INT_ROLE_FIELDS:
                if isinstance(role, dict) and isinstance(role.get(key), str) and role[key].strip().isdigit():
                    role[key] = int(role[key])
        data["tags"] = list(dict.fromkeys([*(data.get("tags") or []), "tony"]))
        checkpoint = dict(data.get("checkpoint") or {})
        checkpoint["dir"] = self.checkpoint_dir or checkpoint.get("dir") or self.default_checkpoint_dir(context)
        if self.warm_start_from:
            checkpoint["warm_start_from"] = self.warm_start_from
        data["checkpoint"] = checkpoint
        return JobSpec.from_dict(data)

    def default_checkpoint_dir(self, context: Any) -> str:
        """Stable across the tries of one task run (HDFS names allow no ':')."""
        ti = context["ti"]
        parts = [ti.dag_id, ti.task_id, ti.run_id]
        if getattr(ti, "map_index", -1) not in (None, -1):
            parts.append(f"map-{ti.map_index}")
        safe = [re.sub(r"[^A-Za-z0-9._-]", "_", str(p)) for p in parts]
        return "/".join([self.hook.base_path.rstrip("/"), "checkpoints", *safe])

    # ------------------------------------------------------------ submit / re-attach

    def _existing(self, context: Any) -> AppReport | None:
        """This task run's application if one is running or has succeeded."""
        apps = self.hook.find_by_tags(self.identity_tags(context), active_only=False)
        for app in apps:  # newest first
            if app.active:
                return app
        if apps and apps[0].state == "FINISHED" and apps[0].final_status == "SUCCEEDED":
            return apps[0]
        return None

    def submit_job(self, context: Any) -> str:
        spec = self._spec or self.build_spec(context)
        existing = self._existing(context)
        if existing is not None:
            self.log.info("re-attaching to %s (%s), submitted for this task run earlier; not submitting again",
                          existing.app_id, existing.state)
            app_id = existing.app_id
        else:
            ti = context["ti"]
            try:
                app_id = self.hook.submit(spec, attempt=int(ti.try_number or 1),
                                          extra_tags=[*self.identity_tags(context), _tag("tony-try", ti.try_number)])
            except SpecError as exc:
                raise AirflowFailException(f"invalid job, nothing was submitted: {exc}") from exc
            self.log.info("submitted %s (%s)", app_id, spec.name)
        self._on_app(app_id, context)
        return app_id

    def _on_app(self, app_id: str, context: Any) -> None:
        self._app_id = app_id
        url = self.hook.get_conn().tracking_url(app_id)
        context["ti"].xcom_push(key=XCOM_TRACKING_URL, value=url)
        page = self.hook.get_conn().job_page_url(app_id)
        context["ti"].xcom_push(key=XCOM_JOB_PAGE_URL, value=page)
        self.log.info("TonY job page: %s", page)
        context["ti"].xcom_push(key="application_id", value=app_id)
        context["ti"].xcom_push(key=XCOM_TENSORBOARD_URL, value="")  # set once the role serves
        self._tensorboard_url = ""
        self.log.info("YARN application page: %s", url)

    def _on_state(self, context: Any, doc: StateDocument | None) -> None:
        url = self.hook.get_conn().tensorboard_url(doc)
        if url and url != self._tensorboard_url:
            self._tensorboard_url = url
            context["ti"].xcom_push(key=XCOM_TENSORBOARD_URL, value=url)
            self.log.info("TensorBoard: %s", url)

    # ------------------------------------------------------------ ResumableJobMixin

    def get_job_status(self, external_id: Any, context: Any) -> str:
        rep = self.hook.report(str(external_id))
        if rep.active:
            return "RUNNING"
        return "SUCCEEDED" if rep.final_status == "SUCCEEDED" else "FAILED"

    def is_job_active(self, status: str) -> bool:
        return status == "RUNNING"

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    # The mixin declares None but returns whatever this returned on reconnect: that is the XCom.
    def poll_until_complete(self, external_id: Any, context: Any) -> dict[str, Any]:  # type: ignore[override]
        """Follow to the end; returns the XCom result (the mixin returns it as is on reconnect)."""
        app_id = str(external_id)
        if self._app_id != app_id:
            self._on_app(app_id, context)
        spec = self._spec
        try:
            result = self.hook.get_conn().wait(
                app_id, poll_interval=self.poll_interval, am_stale_timeout=self.am_stale_timeout,
                startup_timeout=spec.startup_timeout if spec else 600.0, emit=self.log.info,
                on_state=lambda doc: self._on_state(context, doc))
        except BaseException:
            # execution_timeout, SIGTERM, a lost RM connection: the job must not outlive the task.
            self._kill_quietly(app_id)
            raise
        self._finish(result)
        return self.xcom_result(result)

    def get_job_result(self, external_id: Any, context: Any) -> dict[str, Any]:
        app_id = str(external_id)
        if self._result is not None and self._result.app_id == app_id:  # just polled: already logged
            return self._xcom_result(self._result)
        # Re-used an application that had already succeeded: its AM is gone, but the
        # history it left on HDFS keeps the tasks and metrics for the XCom.
        if self._app_id != app_id:
            self._on_app(app_id, context)
        self._result = self.ended_result(app_id)
        return self.xcom_result(self._result)

    def ended_result(self, app_id: str) -> JobResult:
        """How an ended application went: YARN's report plus the AM's stored history.

        When YARN has forgotten the application (an RM restart, its retention),
        the stored history alone answers.
        """
        client = self.hook.get_conn()
        try:
            stored = client.stored_history(app_id)
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
            return JobResult(app_id, "FINISHED", status, state.diagnostics, client.tracking_url(app_id), state)

    # ------------------------------------------------------------ entry points

    def execute(self, context: Any) -> Any:
        try:
            self._spec = self.build_spec(context)
        except SpecError as exc:
            raise AirflowFailException(f"invalid job, nothing was submitted: {exc}") from exc
        if not self.deferrable:
            return self.execute_resumable(context)
        app_id = self.submit_job(context)
        self.defer(trigger=TonyTrigger(app_id=app_id, yarn_conn_id=self.yarn_conn_id,
                                       poll_interval=self.poll_interval,
                                       startup_timeout=self._spec.startup_timeout,
                                       am_stale_timeout=self.am_stale_timeout),
                   method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        try:
            done = TonyEvent.from_dict(event, "event")
        except SpecError as exc:  # never success: the try fails (retryable) and on_kill still knows the app
            self._app_id = str(event.get("app_id") or self._app_id or "") or None
            raise AirflowException(f"lost track of {self._app_id}: the trigger's event is unreadable ({exc})") from exc
        self._app_id = done.app_id
        if done.status != TonyEvent.DONE or done.result is None:
            raise AirflowException(f"lost track of {self._app_id}: {done.message}")
        result = done.result
        self._tensorboard_url = ""
        self._on_state(context, result.am_state)
        self._finish(result)
        return self.xcom_result(result)

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

    def _finish(self, result: JobResult) -> None:
        self._result = result
        if result.succeeded:
            self.log.info("%s SUCCEEDED: %s", result.app_id, result.diagnostics)
            return
        self.log.error("%s %s: %s", result.app_id, result.final_status, result.diagnostics)
        self._copy_failed_logs(result)
        message = (f"TonY job {result.app_id} {result.final_status}: {result.diagnostics}\n"
                   f"Logs: yarn logs -applicationId {result.app_id}")
        if self.fail_fast_on_permanent and not result.retryable:
            raise AirflowFailException(f"{message}\nNot retried: the failure is not retryable "
                                       "(fail_fast_on_permanent=True)")
        raise AirflowException(message)

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
            for name, text in logs.items():
                self.log.error("---- %s %s (%s), last 60 lines ----\n%s", task_id, name, task.container_id,
                               "\n".join(text.splitlines()[-60:]))

    def xcom_result(self, result: JobResult) -> dict[str, Any]:
        """What downstream tasks read: ids, state, per-task summary, metrics, locations."""
        value = self._xcom_result(result)
        self.log.info("result: %s", json.dumps(value, sort_keys=True, default=str))
        return value

    def _xcom_result(self, result: JobResult) -> dict[str, Any]:
        state = result.am_state or StateDocument()
        tasks = {tid: {"state": t.state, "host": t.host, "exit_code": t.exit_code, "restored_step": t.restored_step}
                 for tid, t in state.tasks.items()}
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
        }


__all__ = ["TonyOperator", "XCOM_TENSORBOARD_URL"]
