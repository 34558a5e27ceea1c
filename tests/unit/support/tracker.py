"""Drives the AM's ``JobTracker`` (``runtime/state.py``) with explicit clocks, as the AM would.

A tracker from a role count (``make_tracker``), its tasks registering and beating
(``register``, ``beat``, ``start``), a gang lost and restarted (``lose``, ``restart``,
``run_gang``) and ``failed`` to check a failure verdict. Shared by the state,
restart, preemption, root-cause and blame tests.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_tony.runtime.messages import ClusterDocument, Heartbeat, Progress, Registration
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.state import JobTracker, Verdict

T0 = 1000.0  # the tracker's start on the AM's monotonic clock


def make_spec(roles: dict[str, int | dict[str, Any]], **options: Any) -> JobSpec:
    """``{"worker": 2, "ps": {"instances": 1, "gpus": 2}}`` -> a validated JobSpec."""
    built: dict[str, dict[str, Any]] = {}
    for name, value in roles.items():
        role = {"instances": value} if isinstance(value, int) else dict(value)
        role.setdefault("command", ["true"])
        built[name] = role
    return JobSpec.from_dict({"name": "t", "roles": built, **options})


#: How long a training-code failure (no peer blamed, none silent) waits for a
#: root cause with the default heartbeat_interval (5 s): one container check.
CODE_GRACE = 5.0


def make_tracker(roles: dict[str, int | dict[str, Any]], **options: Any) -> JobTracker:
    return JobTracker(make_spec(roles, **options), T0)


def register(
    tr: JobTracker,
    task_id: str,
    now: float = T0 + 1,
    host: str = "h1",
    port: int | None = None,
    gpus_local: list[str] | None = None,
    gpus_pinned: list[str] | None = None,
) -> None:
    if port is None:
        port = 2000 + sorted(tr.tasks).index(task_id)
    tr.register(task_id, Registration(host=host, port=port, gpus_local=gpus_local or [], gpus_pinned=gpus_pinned), now)


def beat(
    tr: JobTracker,
    task_id: str,
    seq: int,
    now: float,
    user_started: bool = True,
    step: int | None = None,
    total_steps: int | None = None,
    progress_time: float | None = None,
) -> None:
    progress = None
    if step is not None:
        progress = Progress(
            step=step,
            epoch=1,
            time=progress_time if progress_time is not None else float(step),
            total_steps=total_steps,
        )
    tr.heartbeat(task_id, Heartbeat(seq=seq, user_started=user_started, progress=progress), now)


def start(tr: JobTracker, now: float = T0 + 1, skip: tuple[str, ...] = ()) -> ClusterDocument:
    """Register every task (tensorboard too, unless skipped), publish the cluster, start user code."""
    for task_id in tr.tasks:
        if task_id not in skip:
            register(tr, task_id, now)
    doc = tr.cluster_doc(now)
    for task_id in tr.tasks:
        if task_id not in skip:
            beat(tr, task_id, 1, now)
    return doc


def failed(verdict: Verdict | None, *fragments: str, retryable: bool | None = None) -> Verdict:
    assert verdict is not None, "expected a failure verdict, got none"
    assert verdict.succeeded is False, verdict
    assert verdict.final_status == "FAILED"
    for fragment in fragments:
        assert fragment in verdict.diagnostics, (fragment, verdict.diagnostics)
    if retryable is not None:
        assert verdict.retryable is retryable, verdict
    return verdict


# What TensorFlow 2.21 prints when a peer goes away (survivors of a lost
# MultiWorkerMirroredStrategy worker, a ParameterServerStrategy chief whose
# ps died, the coordination service).
COLLECTIVE = [
    "Traceback (most recent call last):",
    "tensorflow.python.framework.errors_impl.UnavailableError: Collective ops is aborted by: "
    "failed to connect to all addresses",
    "\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_step_1234]",
]


HB = {"heartbeat_interval": 1.0, "heartbeat_timeout": 10.0}


FULL_GRACE = 10.0 + 2 * 1.0  # heartbeat_timeout + two beats


def alive(tr: JobTracker, now: float, *task_ids: str) -> None:
    """Each task beats (a new sequence number) at ``now``."""
    for task_id in task_ids or tuple(tr.tasks):
        seq = (tr.tasks[task_id].hb_seq or 0) + 1
        tr.heartbeat(task_id, Heartbeat(seq=seq, user_started=True), now)


WORKERS = {"chief": 1, "worker": 2}


def run_gang(tr: JobTracker, now: float, restored_step: int | None = None, host: str = "h1") -> None:
    """Every task of the current gang registers, gets the cluster and starts user code."""
    gen = tr.generation
    for i, task_id in enumerate(sorted(tr.tasks)):
        tr.register(task_id, Registration(host=host, port=3000 + i, generation=gen), now)
    tr.cluster_doc(now)
    for task_id in tr.tasks:
        tr.heartbeat(task_id, Heartbeat(seq=1, user_started=True, restored_step=restored_step, generation=gen), now)


def lose(tr: JobTracker, task_id: str, now: float) -> None:
    tr.container_ended(task_id, "container KILLED: node lost", now)


def restart(tr: JobTracker, now: float) -> None:
    """What the AM does for a pending restart: new containers named by skein's next instances."""
    slots = {f"{tid.split(':')[0]}_{int(tid.split(':')[1]) + 10 * (tr.generation + 1)}": tid for tid in tr.tasks}
    tr.begin_generation(slots, now)
