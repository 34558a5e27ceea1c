"""Stands in for skein's application around a real ``ApplicationMaster``, for the AM loop's unit tests.

``FakeApp`` is the key-value store and container list the AM reads; ``running_am``
builds an AM whose first gang already runs; ``preempt``/``container``/``exit_record``
play what YARN and the executors report. Shared by the preemption and memory-kill tests.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.messages import ExitRecord
from airflow_provider_tony.runtime.state import JobTracker
from airflow_provider_tony.runtime.yarn_exit import PREEMPTED_DIAGNOSTICS
from tests.unit.support.tracker import T0, WORKERS, make_spec, run_gang

# What the AM's check_containers passes on for a container skein reports FAILED after YARN's -102.
PREEMPTED = f"container container_1_0001_01_000003 FAILED: {PREEMPTED_DIAGNOSTICS}"


def preempt(tr: JobTracker, task_id: str, now: float) -> None:
    tr.container_ended(task_id, PREEMPTED, now, kind=FailureKind.PREEMPTED)


class FakeApp:
    """skein's store and container list: ``containers`` is what get_containers returns, by state."""

    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}
        self.containers: list[Any] = []
        self.calls: list[tuple[str, ...]] = []

    def get_containers(self, states: Any = None) -> list[Any]:
        self.calls.append(tuple(states))
        return [c for c in self.containers if c.state in states]

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        return {k: v for k, v in self.kv.items() if k.startswith(prefix)}


def container(cid: str, state: str, message: str = "") -> Any:
    service, _, instance = cid.rpartition("_")
    return SimpleNamespace(
        id=cid,
        service_name=service,
        instance=int(instance),
        state=state,
        exit_message=message,
        yarn_container_id=f"container_1_0001_01_00000{instance}",
    )


def running_am(max_restarts: int = 0) -> tuple[ApplicationMaster, FakeApp]:
    app = FakeApp()
    am = ApplicationMaster(app, make_spec(WORKERS, max_restarts=max_restarts), "application_1_0001")
    run_gang(am.tracker, T0 + 1)
    return am, app


def exit_record(am: ApplicationMaster, app: FakeApp, task_id: str, code: int, now: float) -> None:
    """The executor's record in the store, read as the AM's loop reads it."""
    app.kv[C.kv_exit(task_id)] = ExitRecord(exit_code=code, stderr_tail=["Terminated"]).to_json()
    am.apply_exit(task_id, ExitRecord.from_json(app.kv[C.kv_exit(task_id)]), now)
