"""Stands in for Airflow and the cluster around a ``TonyOperator``: hook, client, task instance, outlets.

``operator`` builds one on ``FakeHook``; ``succeeded``/``failed`` check its result;
``final_document`` is an AM's last state document. Shared by the operator, gate,
conclusion and lineage tests.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_tony.operators.tony import TonyOperator
from airflow_provider_tony.runtime.messages import (
    Cost,
    JobHistory,
    Progress,
    RestartRecord,
    StateDocument,
    TaskSummary,
    Usage,
)
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.follower import AppReport, JobResult

APP = "application_1700000000000_0042"


URL = f"http://rm:8088/cluster/app/{APP}"


def final_document(*, failed: bool = False) -> StateDocument:
    worker0 = TaskSummary(
        state="FAILED" if failed else "SUCCEEDED",
        role="worker",
        index=0,
        host="node1",
        container_id="container_1_0042_01_000002",
        exit_code=1 if failed else 0,
        restored_step=30,
        progress=Progress(step=60, epoch=3, metrics={"val_accuracy": 0.91}),
        usage=Usage(samples=4, peak_rss_bytes=100 << 20, notes=["lean"]),
    )
    worker1 = TaskSummary(state="STOPPED", role="worker", index=1, host="node2")
    return StateDocument(
        application_id=APP,
        app_state="FAILED" if failed else "SUCCEEDED",
        seq=9,
        final=True,
        tasks={"worker:0": worker0, "worker:1": worker1},
        generation=1,
        restarts=[
            RestartRecord(
                attempt=1,
                failed_task="worker:1",
                reason="worker:1 lost",
                host="node3",
                at=40.0,
                resumed_step=30,
                resumed_at=55.0,
            )
        ],
        events=["worker:0 registered at node1:4000", *ARTEFACTS],
        artefacts=ARTEFACTS,
    )


ARTEFACTS = [
    "restart 1: the new gang resumed from checkpoint step 30, 15.0s after the failure",
    "worker:0 restored checkpoint step 30 from /ckpt/ckpt-30 in 0.2s",
]


class FakeClient:
    def __init__(self, result: JobResult) -> None:
        self.result = result
        self.waited: list[dict[str, Any]] = []

    def tracking_url(self, app_id: str) -> str:
        return f"http://rm:8088/cluster/app/{app_id}"

    def job_page_url(self, app_id: str) -> str:
        return f"http://rm:8088/proxy/{app_id}/pages/tony/"

    def stored_history(self, app_id: str) -> JobHistory | None:
        return self.stored

    stored: JobHistory | None = None

    @staticmethod
    def tensorboard_url(app_id: str, doc: StateDocument | None) -> str:
        return ""

    @staticmethod
    def tensorboard_page_url(app_id: str) -> str:
        return f"http://rm:8088/proxy/{app_id}/pages/tensorboard/"

    def wait(self, app_id: str, **kwargs: Any) -> JobResult:
        self.waited.append({"app_id": app_id, **kwargs})
        return self.result


class FakeHook:
    base_path = "/user/airflow/tony"
    default_queue = "default"

    def __init__(self, result: JobResult) -> None:
        self.client = FakeClient(result)
        self.submitted: list[Any] = []
        self.killed: list[str] = []
        self.logs_asked: list[tuple[str, str]] = []
        self.apps: list[AppReport] = []  # what YARN knows, newest first (as the real hook lists them)
        self.cost: Cost | None = None  # what the RM's final report counts (final_cost)
        self.costs_asked: list[str] = []

    # The hook's own methods, no ``get_conn``: the operator must go through the hook (its one door).
    def tracking_url(self, app_id: str) -> str:
        return self.client.tracking_url(app_id)

    def job_page_url(self, app_id: str) -> str:
        return self.client.job_page_url(app_id)

    def stored_history(self, app_id: str) -> JobHistory | None:
        return self.client.stored_history(app_id)

    def tensorboard_url(self, app_id: str, doc: StateDocument | None) -> str:
        return self.client.tensorboard_url(app_id, doc)

    def tensorboard_page_url(self, app_id: str) -> str:
        return self.client.tensorboard_page_url(app_id)

    def wait(self, app_id: str, **kwargs: Any) -> JobResult:
        return self.client.wait(app_id, **kwargs)

    def find_by_tags(self, tags: list[str], *, active_only: bool = True) -> list[AppReport]:
        """The real hook's contract: applications carrying every tag, newest first."""
        found = [app for app in self.apps if set(tags) <= set(app.tags)]
        return [app for app in found if app.active] if active_only else found

    def submit(self, spec: JobSpec, *, attempt: int) -> str:
        self.submitted.append((spec, attempt, spec.tags))
        app_id = APP if not self.apps else f"{APP[:-4]}{int(APP[-4:]) + len(self.apps):04d}"
        self.apps.insert(0, AppReport(app_id=app_id, state="ACCEPTED", tags=list(spec.tags)))
        return app_id

    def report(self, app_id: str) -> AppReport:
        r = self.client.result
        return AppReport(
            app_id=app_id,
            state=r.yarn_state,
            final_status=r.final_status,
            diagnostics=r.diagnostics,
            tracking_url=r.tracking_url,
        )

    def final_cost(self, app_id: str) -> Cost | None:
        self.costs_asked.append(app_id)
        return self.cost

    def kill(self, app_id: str) -> None:
        self.killed.append(app_id)

    def container_logs(self, container_id: str, host: str) -> dict[str, str]:
        self.logs_asked.append((container_id, host))
        return {"worker.log": "Traceback\nValueError: bad shape\n"}


class FakeTI:
    dag_id, task_id, run_id, map_index, try_number = "nightly", "train", "manual__1", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}  # read by ResumableJobMixin

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


class FakeTaskStateStore(dict[str, Any]):
    """Airflow's ``context["task_state_store"]``: where ResumableJobMixin keeps the application id
    across tries. Without it the mixin warns and runs its non-durable fallback."""

    def set(self, key: str, value: Any) -> None:
        self[key] = value


def operator(result: JobResult, **kwargs: Any) -> tuple[TonyOperator, FakeHook, dict[str, Any]]:
    job = {
        "roles": {"worker": {"instances": 2, "command": ["true"]}},
        "checkpoint": {"model_dir": "/user/airflow/models/digits"},
    }
    op = TonyOperator(task_id="train", job=job, **kwargs)
    hook = FakeHook(result)
    op._hook = hook  # type: ignore[assignment]
    return op, hook, {"ti": FakeTI(), "task_state_store": FakeTaskStateStore()}


def succeeded() -> JobResult:
    return JobResult(APP, "FINISHED", "SUCCEEDED", "worker:0 succeeded", URL, final_document())


def failed(diagnostics: str) -> JobResult:
    return JobResult(APP, "FINISHED", "FAILED", diagnostics, URL, final_document(failed=True))


class OutletEvents(dict):
    """What ``context["outlet_events"]`` does for these tests: an accessor per asset, made on first use."""

    def __missing__(self, key: Any) -> Any:
        from types import SimpleNamespace

        self[key] = SimpleNamespace(extra={})
        return self[key]


def log_lines(op: Any, monkeypatch: Any) -> list[str]:
    """The operator's task log as Airflow shows it: each line ``<level>: <text>``, formatted."""
    lines: list[str] = []
    for level in ("info", "warning", "error"):
        monkeypatch.setattr(op.log, level, lambda msg, *args, _l=level: lines.append(f"{_l}: {msg % args}"))
    return lines
