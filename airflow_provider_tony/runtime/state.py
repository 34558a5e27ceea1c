"""The AM's bookkeeping, failure policy and gang restarts, as pure logic.

Everything here takes the current time as an argument and touches no network,
so the rules (who decides success, when a silent task counts as lost, what a
deadline does) get table-driven unit tests, and the AM loop in ``am.py`` is
only input/output around a ``JobTracker``.

Recovery is a state here, not a special case in the executor: a retryable
failure with restarts left puts the tracker in ``restart_pending`` (the AM
replaces every container) and ``begin_generation`` starts a new gang, whose
executors identify themselves by generation; messages of an older gang are
ignored. Each restart is a ``RestartRecord`` in the state document.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime.blame import BLAMED_MIN_SILENCE_S, BLAMED_MISSED_BEATS, blamed
from airflow_provider_tony.runtime.constants import RETRYABLE_EXIT_CODES, RETRYABLE_MARK, SIGNAL_EXIT_CODES
from airflow_provider_tony.runtime.failure import FailureKind, classify_exit, peer_failure
from airflow_provider_tony.runtime.gpu import assign_gpus
from airflow_provider_tony.runtime.messages import (
    MILESTONE_ALL_USER_STARTED,
    MILESTONE_CLUSTER_PUBLISHED,
    MILESTONE_VERDICT,
    AppState,
    ClusterDocument,
    Failure,
    Heartbeat,
    Progress,
    Registration,
    RestartRecord,
    StateDocument,
    TaskState,
    TaskSummary,
    Usage,
)
from airflow_provider_tony.runtime.spec import JobSpec, task_of_container
from airflow_provider_tony.runtime.tf_config import TF_CLUSTER_ROLES, parse_task_id
from airflow_provider_tony.runtime.usage import notes as usage_notes
from airflow_provider_tony.runtime.yarn_exit import MemoryKill

# Roles whose address every TensorFlow member needs, so rendezvous waits for
# them even when untracked (a ps is untracked but must be in the cluster).
RENDEZVOUS_ROLES = frozenset(TF_CLUSTER_ROLES) | {"evaluator"}
# Restarts after a preemption do not count against max_restarts, but a queue
# that preempts a job over and over must not keep it alive forever: past this
# many, a preemption ends the job as retryable (Airflow's retry decides).
MAX_PREEMPTION_RESTARTS = 20


@dataclass
class Verdict:
    """How the job ends; ``retryable`` tells Airflow a retry may succeed."""

    succeeded: bool
    diagnostics: str
    retryable: bool = False
    task_id: str | None = None  # the task whose failure decided it (the root cause), if one did
    cause: FailureKind | None = None  # what happened to that task
    consequences: list[str] = field(default_factory=list)  # tasks that failed because of it
    exit_code: int | None = None  # the root cause's exit code, if it exited
    # An out_of_memory cause: YARN's figure of what it used, its role's request, the field to raise.
    peak_mib: int | None = None
    requested_mib: int | None = None
    fix_field: str | None = None

    @property
    def final_status(self) -> str:
        return "SUCCEEDED" if self.succeeded else "FAILED"

    def failure(self) -> Failure | None:
        """The typed root cause for the state document (None on success)."""
        if self.succeeded:
            return None
        return Failure(
            kind=self.cause.value if self.cause is not None else "",
            retryable=self.retryable,
            task_id=self.task_id,
            exit_code=self.exit_code,
            message=self.diagnostics,
            consequences=list(self.consequences),
            peak_mib=self.peak_mib,
            requested_mib=self.requested_mib,
            fix_field=self.fix_field,
        )


@dataclass
class TaskRecord:
    """The AM's record of one task (the executor's own view of itself is ``executor.ContainerTask``)."""

    task_id: str
    role: str
    index: int
    tracked: bool
    state: TaskState = TaskState.PENDING
    host: str | None = None
    port: int | None = None
    container_id: str | None = None
    nm_http_port: int | None = None  # its NodeManager's web port, when the executor said
    gpus_local: list[str] = field(default_factory=list)
    gpus_pinned: list[str] | None = None
    gpus: list[str] = field(default_factory=list)
    gpus_wanted: int = 0
    granted: bool = False  # its GPUs were published in the cluster document
    registered_at: float | None = None
    hb_seq: Any = None
    last_heartbeat: float | None = None  # AM monotonic clock when the seq last changed
    exit_code: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
    progress: Progress | None = None
    progress_key: Any = None
    progress_changed_at: float | None = None
    message: str = ""
    restored_step: int | None = None
    usage: Usage | None = None  # what its training process used, with the role's request and notes
    # Set when the task failed or was lost: what kind of failure, and when the
    # AM learned of it (its monotonic clock), so a gang's failures are judged together.
    kind: FailureKind | None = None
    failed_at: float | None = None
    failed_seq: int = 0  # order of observation, for failures seen in the same tick
    memory_kill: MemoryKill | None = None  # YARN killed its container for memory (kind OUT_OF_MEMORY)

    def summary(self, now: float) -> TaskSummary:
        return TaskSummary(
            state=self.state.value,
            role=self.role,
            index=self.index,
            tracked=self.tracked,
            host=self.host,
            port=self.port,
            container_id=self.container_id,
            gpus=list(self.gpus),
            seconds_since_heartbeat=None if self.last_heartbeat is None else round(now - self.last_heartbeat, 2),
            exit_code=self.exit_code,
            progress=self.progress,
            stderr_tail=self.stderr_tail[-5:],
            message=self.message,
            restored_step=self.restored_step,
            usage=self.usage,
        )


def exit_code_retryable(code: int | None, extra: list[int] | tuple[int, ...] = ()) -> bool:
    """Whether a task's exit code makes the job's failure worth a retry.

    Signals (128-255, or negative) and 75 are retryable; so are the job's own
    ``retryable_exit_codes``. Anything else (a traceback's exit 1, a bad
    argument's exit 2) would fail the same way again.
    """
    if code is None:
        return False
    return code < 0 or code in SIGNAL_EXIT_CODES or code in RETRYABLE_EXIT_CODES or code in extra


def _stderr_line(tail: list[str]) -> str:
    lines = [line for line in tail if line.strip()]
    return lines[-1].strip()[:500] if lines else "(no stderr)"


def _earliest(tasks: list[TaskRecord]) -> TaskRecord:
    """The failed task the AM learned of first (every failure is numbered when it is seen)."""
    return min(tasks, key=lambda t: t.failed_seq)


class JobTracker:
    """Registrations, heartbeats, exits and the failure policy of one job."""

    def __init__(self, spec: JobSpec, now: float) -> None:
        self.spec = spec
        self.started = now
        self.cluster_published_at: float | None = None
        self.verdict: Verdict | None = None
        self.events: list[str] = []
        self.artefacts: list[str] = []  # the events users follow (StateDocument.artefacts)
        # Seconds after the AM started at which milestones were reached (benchmarks, logs).
        self.timeline: dict[str, float] = {}
        # The gang: 0 is the one started with the application; each restart adds one.
        self.generation = 0
        self.generation_started = now
        # What registration_timeout counts from: the gang's start, or, for a gang that replaces a
        # preempted one, when YARN allocated its last container (capacity_pending).
        self.registration_started = now
        self.restarts: list[RestartRecord] = []
        # A restart decided and not yet carried out: the AM replaces the containers.
        self.restart_pending: RestartRecord | None = None
        # skein container id ("worker_2") -> its task in a restarted gang.
        self.slots: dict[str, str] = {}
        # Hosts a failed task was lost on (no exit record, heartbeats stopped) or
        # killed on by a signal (a NodeManager that shuts down SIGTERMs its
        # containers): a restarted gang's spread tasks pinned there go elsewhere.
        self.lost_hosts: set[str] = set()
        # The checkpoint uploader the AM lets finish before it stops the gang
        # (None: no uploader alive to wait for).
        self.drain_task: str | None = None
        # The current gang's wait for capacity after a preemption is in the events.
        self._noted_capacity_wait = False
        self.failures_seen = 0
        #: Whether a task's NodeManager says its container ended (the AM sets ``nm_probe``'s look;
        #: pure by default): a blamed task whose container YARN ended is not declared lost early.
        #: Asked once per task: "ended" is final (``_awaiting_yarn``), any other answer declares it lost.
        self.ended_on_its_node: Callable[[TaskRecord], bool] = lambda task: False
        self._awaiting_yarn: set[str] = set()
        self.tasks: dict[str, TaskRecord] = self._new_tasks()

    def _new_tasks(self) -> dict[str, TaskRecord]:
        tracked = set(self.spec.tracked_roles())
        tasks: dict[str, TaskRecord] = {}
        for task_id in self.spec.task_ids():
            role, index = parse_task_id(task_id)
            tasks[task_id] = TaskRecord(
                task_id, role, index, tracked=role in tracked, gpus_wanted=self.spec.roles[role].gpus
            )
        return tasks

    def task_of_container(self, service: str, instance: int) -> str | None:
        """The task a skein container serves in the current gang; None for an older gang's."""
        slotted = self.slots.get(f"{service}_{instance}")  # named by the AM: a restart, or placed elsewhere
        if slotted is not None or self.generation != 0:
            return slotted
        task_id = task_of_container(service, instance)
        role, _, index = task_id.rpartition(":")
        first = role in self.spec.roles and instance < (self.spec.roles[role].instances if service == role else 1)
        return task_id if first and task_id in self.tasks else None

    # ------------------------------------------------------------ inputs

    def register(self, task_id: str, info: Registration, now: float) -> None:
        task = self.tasks.get(task_id)
        if task is None or task.state != TaskState.PENDING or info.generation != self.generation:
            return
        task.state = TaskState.REGISTERED
        task.host = info.host
        task.port = info.port
        task.container_id = info.container_id
        task.nm_http_port = info.nm_http_port
        task.gpus_local = list(info.gpus_local)
        task.gpus_pinned = None if info.gpus_pinned is None else list(info.gpus_pinned)
        task.registered_at = now
        task.last_heartbeat = now
        self.events.append(f"{task_id} registered at {task.host}:{task.port}")

    def rendezvous_tasks(self) -> list[TaskRecord]:
        return [t for t in self.tasks.values() if t.tracked or t.role in RENDEZVOUS_ROLES]

    def rendezvous_ready(self) -> bool:
        return all(t.state != TaskState.PENDING for t in self.rendezvous_tasks())

    def cluster_doc(self, now: float) -> ClusterDocument:
        """The cluster spec every executor waits for: addresses and GPU grants.

        Tasks that register late (tensorboard) read the same document: it
        holds every address known now, and all rendezvous tasks.
        """
        registered = [t for t in self.tasks.values() if t.host is not None]
        node_gpus: dict[str, list[str]] = {}
        for t in registered:
            gpus = node_gpus.setdefault(str(t.host), [])  # str(): registered tasks have a host
            for g in t.gpus_local:
                if g not in gpus:
                    gpus.append(g)
        requests = [(t.task_id, str(t.host), t.gpus_wanted) for t in registered]
        # Grants already published are final (executors read the document
        # once); a late task only gets what is still free.
        fixed = {t.task_id: t.gpus_pinned for t in registered if t.gpus_pinned}
        fixed.update({t.task_id: t.gpus for t in registered if t.granted and t.gpus})
        grants = assign_gpus(requests, node_gpus, fixed)
        for t in registered:
            t.gpus = grants.get(t.task_id, [])
            t.granted = True
        if self.cluster_published_at is None:
            self.cluster_published_at = now
            self.timeline[MILESTONE_CLUSTER_PUBLISHED] = round(now - self.started, 3)
            self.events.append(f"cluster spec published ({len(registered)} tasks)")
        return ClusterDocument(
            addresses={t.task_id: f"{t.host}:{t.port}" for t in registered},
            gpus={t.task_id: list(t.gpus) for t in registered},
            num_tasks={role: r.instances for role, r in self.spec.roles.items()},
            generation=self.generation,
        )

    def heartbeat(self, task_id: str, payload: Heartbeat, now: float) -> None:
        """Count a beat only when its sequence number moved (no clock comparison
        across hosts: the AM times silence on its own monotonic clock)."""
        task = self.tasks.get(task_id)
        if task is None or task.state.finished or payload.generation != self.generation:
            return
        if payload.restored_step is not None:
            task.restored_step = payload.restored_step
        seq = payload.seq
        if seq != task.hb_seq:
            task.hb_seq = seq
            task.last_heartbeat = now
        if payload.user_started and task.state == TaskState.REGISTERED:
            task.state = TaskState.RUNNING
            task.progress_changed_at = now
            self.events.append(f"{task_id} started user code")
            if self.all_started():
                self.timeline.setdefault(MILESTONE_ALL_USER_STARTED, round(now - self.started, 3))
                self._resumed(now)
        if payload.usage is not None:
            self._used(task, payload.usage)
        progress = payload.progress
        if progress is not None:
            key = progress.key()
            if key != task.progress_key:
                task.progress_key = key
                task.progress = progress
                task.progress_changed_at = now

    def all_started(self) -> bool:
        """Every rendezvous task of the current gang runs its user code."""
        return all(t.state not in (TaskState.REGISTERED, TaskState.PENDING) for t in self.rendezvous_tasks())

    def _resumed(self, now: float) -> None:
        """A restarted gang runs user code again: note when, and from which checkpoint step."""
        if not self.restarts or self.restarts[-1].resumed_at is not None:
            return
        record = self.restarts[-1]
        record.resumed_at = round(now - self.started, 3)
        decider = self.tasks.get(self.spec.decider_task())
        steps = [t.restored_step for t in self.tasks.values() if t.tracked and t.restored_step is not None]
        record.resumed_step = (
            decider.restored_step
            if decider is not None and decider.restored_step is not None
            else max(steps, default=None)
        )
        where = (
            "from scratch (no checkpoint)"
            if record.resumed_step is None
            else f"from checkpoint step {record.resumed_step}"
        )
        if record.last_step is not None:
            where += f" (step {record.last_step} reached before the failure)"
        self.note_artefact(
            f"restart {record.attempt}: the new gang resumed {where}, "
            f"{record.resumed_at - record.at:.1f}s after the failure"
        )

    def exited(
        self,
        task_id: str,
        exit_code: int,
        stderr_tail: list[str],
        now: float,
        progress: Progress | None = None,
        generation: int = 0,
        usage: Usage | None = None,
    ) -> None:
        task = self.tasks.get(task_id)
        if task is None or task.state.finished or generation != self.generation:
            return
        if progress is not None:
            task.progress = progress
        if usage is not None:
            self._used(task, usage)
        task.exit_code = int(exit_code)
        task.stderr_tail = list(stderr_tail)
        task.state = TaskState.SUCCEEDED if exit_code == 0 else TaskState.FAILED
        if exit_code != 0:
            task.kind = classify_exit(task.exit_code, task.stderr_tail, self.spec.retryable_exit_codes)
            self._failed(task, now)
        self.events.append(f"{task_id} exited with code {exit_code}")

    def _used(self, task: TaskRecord, usage: Usage) -> None:
        """The executor's figures, with the role's request from the AM's own JobSpec and the notes on it."""
        role = self.spec.roles.get(task.role)
        if role is not None:
            usage.requested_memory_mib, usage.requested_vcores, usage.requested_gpus = (
                role.memory,
                role.vcores,
                role.gpus,
            )
            usage.notes = usage_notes(usage, role.memory, role.vcores, role.gpus)
        task.usage = usage

    def _failed(self, task: TaskRecord, now: float) -> None:
        self.failures_seen += 1
        task.failed_at = now
        task.failed_seq = self.failures_seen

    def container_ended(self, task_id: str, message: str, now: float, kind: FailureKind = FailureKind.LOST) -> None:
        """The container is gone but its executor never reported an exit (``kind``: lost or preempted)."""
        task = self.tasks.get(task_id)
        if task is None or task.state.finished:
            return
        task.state = TaskState.LOST
        task.kind = kind
        self._failed(task, now)
        task.message = message or "container ended without reporting an exit code"
        self.events.append(f"{task_id} container ended: {task.message}")

    def memory_killed(
        self,
        task_id: str,
        kill: MemoryKill,
        exit_code: int | None,
        now: float,
        usage: Usage | None = None,
        stderr_tail: list[str] | None = None,
    ) -> None:
        """YARN killed the task's container over its memory request (its diagnostics said so).

        YARN's word wins over the executor's exit record (the SIGTERM's 143, a
        signal death): the same request would be killed again, so the failure is
        ``OUT_OF_MEMORY``, not retryable and no in-application restart.
        """
        task = self.tasks.get(task_id)
        if task is None or task.state.finished:
            return
        task.state = TaskState.FAILED
        task.kind = FailureKind.OUT_OF_MEMORY
        task.memory_kill = kill
        task.exit_code = exit_code
        if usage is not None:
            self._used(task, usage)
        if stderr_tail is not None:
            task.stderr_tail = list(stderr_tail)
        self._failed(task, now)
        task.message = self._memory_text(task)
        self.events.append(f"{task_id} killed by YARN for memory: {task.message}")

    def _memory_text(self, task: TaskRecord) -> str:
        kill = task.memory_kill
        role = self.spec.roles.get(task.role)
        requested = role.memory if role is not None else None
        used = "" if kill is None or kill.used_mib is None else f"{kill.used_mib} MiB"
        limit = "" if kill is None or kill.limit_mib is None else f"{kill.limit_mib} MiB"
        which = kill.memory if kill is not None else "physical"
        text = f"its container went over its {which} memory limit"
        if used and limit:
            text = f"it used {used} of {which} memory, over its container's limit of {limit}"
        if requested is not None:
            text += f" (roles.{task.role}.memory asks for {requested} MiB)"
        return text

    def stopped(self, task_id: str) -> None:
        """The AM stopped a task still running at the verdict: STOPPED after a success, KILLED after a failure.

        A worker or ps stopped because the chief finished did nothing wrong: it
        must not read as killed (a red mark on a good run).
        """
        task = self.tasks[task_id]
        if task.state.finished:
            return
        verdict = self.verdict
        if verdict is not None and verdict.succeeded:
            task.state = TaskState.STOPPED
            done = (
                "every tracked task finished"
                if self.spec.success_policy == "all_workers"
                else f"{self.spec.decider_task()} finished"
            )
            task.message = f"stopped: {done}"
        else:
            task.state = TaskState.KILLED
            task.message = "stopped by the application master: the job failed"

    # ------------------------------------------------------------ policy

    def check(self, now: float, wall: float | None = None) -> Verdict | None:
        """Apply the failure policy; the first verdict sticks.

        A retryable failure of a task with restarts left is no verdict: it
        becomes ``restart_pending`` and the AM replaces the gang.
        """
        if self.verdict is None and self.restart_pending is None:
            verdict = self._decide(now)
            if verdict is not None and self._restartable(verdict):
                self._plan_restart(verdict, now, wall)
                return None
            if verdict is not None and not verdict.succeeded and verdict.retryable and self.restarts:
                verdict.diagnostics += (
                    f" (after {self._restarts_counted()} in-application restart(s), max_restarts "
                    f"{self.spec.max_restarts}: left to Airflow's retry)"
                )
            self.verdict = verdict
            if self.verdict is not None:
                self.timeline[MILESTONE_VERDICT] = round(now - self.started, 3)
        return self.verdict

    def _restarts_counted(self) -> int:
        """Restarts that count against ``max_restarts``: every one but those after a preemption."""
        return sum(not r.preempted for r in self.restarts)

    def _restartable(self, verdict: Verdict) -> bool:
        if verdict.succeeded or not verdict.retryable or verdict.task_id is None or verdict.cause is None:
            return False
        if verdict.cause is FailureKind.PREEMPTED:
            return len(self.restarts) - self._restarts_counted() < MAX_PREEMPTION_RESTARTS
        return self._restarts_counted() < self.spec.max_restarts

    def _plan_restart(self, verdict: Verdict, now: float, wall: float | None) -> None:
        assert verdict.task_id is not None and verdict.cause is not None  # _restartable checked both
        failed = self.tasks[verdict.task_id]
        decider = self.tasks.get(self.spec.decider_task())
        last_step = decider.progress.step if decider is not None and decider.progress is not None else None
        record = RestartRecord(
            attempt=len(self.restarts) + 1,
            failed_task=failed.task_id,
            reason=verdict.diagnostics,
            host=failed.host,
            at=round(now - self.started, 3),
            at_wall=wall,
            last_step=last_step,
            cause=verdict.cause.value,
            consequences=list(verdict.consequences),
        )
        self.restarts.append(record)
        self.restart_pending = record
        # A preempted container's node is healthy: its new container may go back there.
        lost = failed.state is TaskState.LOST or failed.exit_code in SIGNAL_EXIT_CODES
        if failed.host and lost and failed.kind is not FailureKind.PREEMPTED:
            self.lost_hosts.add(failed.host)
        self.drain_task = self._uploader_alive()
        for task in self.tasks.values():
            if not task.state.finished:
                task.state = TaskState.RESTARTING
                task.message = f"stopped to restart the gang after {failed.task_id} failed"
        counted = self._restarts_counted()
        if record.preempted:
            which = (
                f"restart {record.attempt} (after a preemption, not counted against max_restarts; "
                "the new gang waits for the queue's capacity)"
            )
        elif counted == record.attempt:
            which = f"restart {record.attempt} of {self.spec.max_restarts}"
        else:  # earlier restarts were preemptions
            which = f"restart {record.attempt} ({counted} of max_restarts {self.spec.max_restarts})"
        self.note_artefact(f"{which}: {verdict.diagnostics}; replacing every task, resuming from the latest checkpoint")

    def _uploader_alive(self) -> str | None:
        """The task that uploads checkpoints, if it still runs user code on a live node.

        Only the decider uploads (the executor's rule); it is worth waiting for
        only while it runs (so not when it is the failure: a failed or lost
        task is not RUNNING) and is not on the lost node.
        """
        uploader = self.tasks.get(self.spec.decider_task())
        if (
            self.spec.checkpoint.dir is None
            or uploader is None
            or uploader.state is not TaskState.RUNNING
            or uploader.host in self.lost_hosts
        ):
            return None
        return uploader.task_id

    def drained(self, step: int | None, seconds: float, last_step: int | None = None) -> None:
        """The uploader finished (or the AM stopped waiting): the pending restart may go on.

        ``last_step`` is the step its training process had reached when it was
        stopped for the drain: the old gang's real last step, later than the
        one known when the restart was decided.
        """
        record = self.restart_pending
        if record is None:
            return
        if last_step is not None and (record.last_step is None or last_step > record.last_step):
            record.last_step = last_step
        record.drained_step = step
        record.drain_seconds = round(seconds, 3)
        if step is not None:
            self.note_artefact(f"restart {record.attempt}: checkpoint step {step} on HDFS before the gang was stopped")

    def begin_generation(self, slots: dict[str, str], now: float) -> None:
        """The AM has asked for a fresh gang: ``slots`` maps its containers to tasks."""
        self.generation += 1
        self.generation_started = now
        self.registration_started = now
        self.slots = dict(slots)
        self.tasks = self._new_tasks()
        self._awaiting_yarn = set()
        self.cluster_published_at = None
        self.restart_pending = None
        self.drain_task = None
        self._noted_capacity_wait = False
        self.note_artefact(
            f"restart {len(self.restarts)}: gang {self.generation} requested ({len(self.tasks)} containers)"
        )

    def note_artefact(self, text: str) -> None:
        """An event users follow (a checkpoint, the model, a restart): in ``events`` and ``artefacts``."""
        self.events.append(text)
        self.artefacts.append(text)

    def waiting_for_capacity(self) -> bool:
        """The gang replaces a preempted one and has not registered yet.

        Only then does ``capacity_pending`` hold the registration clock: the
        queue that preempted the job may keep its capacity for a long time.
        """
        return (
            self.generation > 0
            and self.restart_pending is None
            and self.cluster_published_at is None
            and len(self.restarts) == self.generation
            and self.restarts[-1].preempted
        )

    def capacity_pending(self, waiting: int, now: float) -> None:
        """YARN has not yet allocated ``waiting`` containers of a gang that replaces a preempted one.

        The rule: after a preemption, ``registration_timeout`` runs from when
        the gang's last container is allocated, not from when it was asked
        for, so a job waits as long as its queue's capacity is taken (bounded
        by its ``deadline``, if it has one, as any job is). A gang whose
        containers are all allocated but do not register still times out.
        """
        if waiting <= 0 or not self.waiting_for_capacity():
            return
        if not self._noted_capacity_wait:
            self.events.append(
                f"gang {self.generation} waits for the queue's capacity: {waiting} container(s) "
                "not allocated yet (the registration timeout starts once they are)"
            )
            self._noted_capacity_wait = True
        self.registration_started = now

    def failing(self) -> bool:
        """A task of the gang has failed and the gang's fate is not decided yet: the AM then reads
        YARN's container statuses every tick, so that a peer's silence is judged with YARN's word."""
        return self.verdict is None and any(t.state is TaskState.FAILED for t in self.tasks.values())

    def _fatal(self, task: TaskRecord) -> bool:
        """A task whose failure fails the gang: tracked, or a member of the TensorFlow cluster."""
        return task.tracked or task.role in TF_CLUSTER_ROLES

    def _declare_blamed(self, now: float) -> None:
        """Tasks that failed peers blame and that missed ``BLAMED_MISSED_BEATS`` beats are lost now.

        The evidence is conclusive well before ``heartbeat_timeout``: a
        survivor's TensorFlow error naming the peer (``runtime/blame.py``) and
        the peer's own silence. Neither alone declares anything: a slow task
        only misses beats, and a peer that still beats was not the fault.
        """
        spec = self.spec
        blamers = [t for t in self.tasks.values() if t.state is TaskState.FAILED and t.kind is FailureKind.PEER]
        if not blamers:
            return
        quiet = max(spec.heartbeat_interval * BLAMED_MISSED_BEATS, BLAMED_MIN_SILENCE_S)
        for task in self.tasks.values():
            if task.state not in (TaskState.REGISTERED, TaskState.RUNNING) or task.last_heartbeat is None:
                continue
            silent = now - task.last_heartbeat
            if silent < quiet or not self._fatal(task) or task.host is None:
                continue
            accusers = [
                b for b in blamers if task.task_id in blamed([b.stderr_tail], {task.task_id: (task.host, task.port)})
            ]
            if not accusers:
                continue
            if task.task_id in self._awaiting_yarn:
                continue  # its NodeManager said the container ended: a container does not start again
            if self.ended_on_its_node(task):
                # The node is alive and YARN ended the container: its word (why) is on the way, and
                # the ordinary heartbeat timeout still declares the task lost if it never comes.
                self._awaiting_yarn.add(task.task_id)
                self.events.append(
                    f"{task.task_id} is blamed and silent, but its NodeManager says its container ended: "
                    "waiting for YARN's exit status"
                )
                continue
            task.state = TaskState.LOST
            task.kind = FailureKind.LOST
            self._failed(task, now)
            task.message = (
                f"declared lost on {task.host}: {', '.join(a.task_id for a in accusers)} failed blaming it, "
                f"and it has been silent for {silent:.1f}s (~{int(silent / spec.heartbeat_interval)} beats of "
                f"{spec.heartbeat_interval:g}s; declared at {quiet:g}s with blame, "
                f"{spec.heartbeat_timeout:g}s without); its node or executor is gone"
            )

    def _mark_silent(self, now: float) -> None:
        """Tasks silent past ``heartbeat_timeout`` are lost (their executor is hung or their node gone);
        sooner when failed peers blame them (``_declare_blamed``)."""
        self._declare_blamed(now)
        spec = self.spec
        for task in self.tasks.values():
            if task.state not in (TaskState.REGISTERED, TaskState.RUNNING) or task.last_heartbeat is None:
                continue
            silent = now - task.last_heartbeat
            if silent > spec.heartbeat_timeout and self._fatal(task):
                missed = int(silent / spec.heartbeat_interval)
                task.state = TaskState.LOST
                task.kind = FailureKind.LOST
                self._failed(task, now)
                task.message = (
                    f"missed heartbeats on {task.host}: silent for {silent:.1f}s (~{missed} beats of "
                    f"{spec.heartbeat_interval:g}s; timeout {spec.heartbeat_timeout:g}s); its executor is "
                    "hung or its node is lost"
                )

    def grace(self, failed: list[TaskRecord], now: float) -> float:
        """How long after the gang's first failure the AM waits for its root cause.

        A failure that TensorFlow blames on a peer (a collective aborted, a
        peer unavailable) waits up to ``heartbeat_timeout`` plus two beats: by
        then a peer whose node died has been declared lost. Any other exit of
        the training code waits one container check (``heartbeat_interval``,
        1-5 s) so that YARN's status of the other containers is read once,
        and longer only while a live peer has already missed two beats (it may
        be on a node that just died); a bug with no peer lost still fails
        within seconds.
        """
        spec = self.spec
        full = spec.heartbeat_timeout + 2 * spec.heartbeat_interval
        if any(t.kind is FailureKind.PEER for t in failed):
            return full
        suspect = any(
            self._fatal(t)
            and t.state in (TaskState.REGISTERED, TaskState.RUNNING)
            and t.last_heartbeat is not None
            and now - t.last_heartbeat > 2 * spec.heartbeat_interval
            for t in self.tasks.values()
        )
        return full if suspect else min(max(spec.heartbeat_interval, 1.0), 5.0)

    def _judge(self, failed: list[TaskRecord], now: float) -> Verdict | None:
        """The root cause among a gang's failed tasks, or None while it may still show up.

        A lost task (no exit record, missed heartbeats, preempted, killed by a
        signal) is the cause and every other failure its consequence; so is an
        exit the job marks retryable. Otherwise the AM waits ``grace`` for one;
        then the first failure of the training code itself is the cause (not
        retryable), and failures that only blame a peer that was never seen
        lost are retryable (TensorFlow says the fault was elsewhere).
        """
        # HDFS refusing a folder for good is the cause whatever else failed: every retry would meet it.
        losses = [t for t in failed if t.kind is FailureKind.HDFS_REFUSED]
        losses = losses or [t for t in failed if t.kind is not None and t.kind.loss]
        if not losses:
            losses = [t for t in failed if t.kind is FailureKind.RETRYABLE_EXIT]
        if losses:
            root = _earliest(losses)
        else:
            first = _earliest(failed)
            if first.failed_at is not None and now - first.failed_at < self.grace(failed, now):
                return None
            own = [t for t in failed if t.kind is not FailureKind.PEER]
            root = _earliest(own) if own else first
        return self._failure_verdict(root, [t for t in failed if t is not root])

    def _failure_verdict(self, root: TaskRecord, others: list[TaskRecord]) -> Verdict:
        # Every failed or lost task has its kind (set where it failed); CODE is the conservative default.
        kind = root.kind or FailureKind.CODE
        memory: dict[str, Any] = {}
        if kind is FailureKind.OUT_OF_MEMORY:
            fix = f"roles.{root.role}.memory"
            role = self.spec.roles.get(root.role)
            kill = root.memory_kill
            memory = {
                "peak_mib": kill.used_mib if kill is not None else None,
                "requested_mib": role.memory if role is not None else None,
                "fix_field": fix,
            }
            text = (
                f"{root.task_id} out of memory: YARN killed its container on {root.host or 'its node'}: "
                f"{root.message}; not retried with the same request: raise {fix} (or set memory_retry for "
                "the next Airflow try to ask for more)"
            )
        elif root.state is TaskState.LOST:
            text = f"{root.task_id} lost: {root.message}"
        else:
            where = root.host or "an unregistered container"
            text = (
                f"{root.task_id} exited with code {root.exit_code} on {where}; "
                f"last stderr line: {_stderr_line(root.stderr_tail)}"
            )
            blamed = peer_failure(root.stderr_tail) if kind is FailureKind.PEER else None
            if blamed:
                text += f" (TensorFlow blames a peer, none was seen lost: {blamed})"
        if others:
            text += "; consequences: " + ", ".join(
                f"{t.task_id} {'lost' if t.state is TaskState.LOST else f'exited {t.exit_code}'}" for t in others
            )
        return Verdict(
            False,
            text,
            retryable=kind.retryable,
            task_id=root.task_id,
            cause=kind,
            consequences=[t.task_id for t in others],
            exit_code=root.exit_code,
            **memory,
        )

    def _decide(self, now: float) -> Verdict | None:
        spec = self.spec
        self._mark_silent(now)
        failed = [t for t in self.tasks.values() if t.state in (TaskState.FAILED, TaskState.LOST) and self._fatal(t)]
        if failed:
            return self._judge(failed, now)  # None: waiting for a root cause, nothing else decides meanwhile
        if self.cluster_published_at is None:
            if now - self.registration_started > spec.registration_timeout:
                missing = [t.task_id for t in self.rendezvous_tasks() if t.state == TaskState.PENDING]
                return Verdict(
                    False,
                    f"registration timeout ({spec.registration_timeout:g}s): tasks "
                    f"{', '.join(missing)} never registered (no container was allocated "
                    "or their executors did not start); the cluster may be too small for "
                    "this job: lower instances/memory or use a bigger queue",
                )
        stall = spec.progress_stall_timeout
        if stall:
            for task in self.tasks.values():
                if (
                    task.state == TaskState.RUNNING
                    and task.tracked
                    and task.progress is not None
                    and task.progress_changed_at is not None
                    and now - task.progress_changed_at > stall
                ):
                    step = task.progress.step
                    return Verdict(
                        False,
                        f"{task.task_id} progress stalled: no new step for "
                        f"{now - task.progress_changed_at:.1f}s (progress_stall_timeout {stall:g}s; "
                        f"last step {step}); a collective may be deadlocked",
                        retryable=True,
                        task_id=task.task_id,
                        cause=FailureKind.STALLED,
                    )
        if spec.deadline is not None and now - self.started > spec.deadline:
            running = [t.task_id for t in self.tasks.values() if t.tracked and not t.state.finished]
            return Verdict(
                False, f"deadline of {spec.deadline:g}s exceeded; still running: {', '.join(running) or 'none'}"
            )
        return self._success()

    def _success(self) -> Verdict | None:
        tracked = [t for t in self.tasks.values() if t.tracked]
        if self.spec.success_policy == "all_workers":
            if tracked and all(t.state == TaskState.SUCCEEDED for t in tracked):
                return Verdict(True, f"all {len(tracked)} tracked tasks succeeded")
            return None
        decider = self.tasks.get(self.spec.decider_task())
        if decider is not None and decider.state == TaskState.SUCCEEDED:
            return Verdict(True, f"{decider.task_id} succeeded")
        return None

    def to_stop(self) -> list[str]:
        """Tasks still running once the verdict is in (untracked roles, siblings)."""
        return [t.task_id for t in self.tasks.values() if not t.state.finished]

    # ------------------------------------------------------------ reporting

    def app_state(self) -> AppState:
        if self.verdict is not None:
            return AppState.SUCCEEDED if self.verdict.succeeded else AppState.FAILED
        if self.restart_pending is not None or (self.generation and self.cluster_published_at is None):
            return AppState.RESTARTING
        return AppState.RUNNING if self.cluster_published_at is not None else AppState.REGISTERING

    def progress_fraction(self) -> float:
        decider = self.tasks.get(self.spec.decider_task())
        if self.verdict is not None:
            return 1.0
        fraction = decider.progress.fraction() if decider is not None and decider.progress else None
        if fraction is not None:
            return max(0.0, min(0.99, fraction))
        tracked = [t for t in self.tasks.values() if t.tracked]
        done = sum(t.state.finished for t in tracked)
        return min(0.99, done / len(tracked)) if tracked else 0.0

    def document(self, now: float, wall: float, seq: int, app_id: str) -> StateDocument:
        verdict = self.verdict
        return StateDocument(
            application_id=app_id,
            app_state=self.app_state().value,
            am_heartbeat=wall,
            seq=seq,
            elapsed=round(now - self.started, 2),
            final=verdict is not None,
            diagnostics=verdict.diagnostics if verdict else "",
            retryable=bool(verdict and verdict.retryable),
            failure=verdict.failure() if verdict else None,
            progress=self.progress_fraction(),
            tasks={tid: t.summary(now) for tid, t in self.tasks.items()},
            events=self.events[-50:],
            artefacts=self.artefacts[-50:],
            timeline=dict(self.timeline),
            am_started_wall=round(wall - (now - self.started), 3),
            generation=self.generation,
            restarts=[RestartRecord.from_dict(r.to_dict()) for r in self.restarts],
        )


# Fields of the state document that change on every look (clocks, progress).
# A change in these alone waits for the next heartbeat interval to be
# published; anything else (a task's state, an event, a milestone, the
# verdict) goes out on the next tick. Publishing every 0.25 s tick because a
# "seconds since heartbeat" moved kept skein's AM JVM busy for nothing.
_VOLATILE = ("am_heartbeat", "seq", "elapsed", "am_started_wall", "progress")
_VOLATILE_TASK = ("seconds_since_heartbeat", "progress", "usage")


def material(doc: StateDocument) -> str:
    """The state document without its ever-changing fields, as a comparable string."""
    data = doc.to_dict()
    view = {k: v for k, v in data.items() if k not in _VOLATILE}
    view["tasks"] = {
        tid: {k: v for k, v in task.items() if k not in _VOLATILE_TASK} for tid, task in data["tasks"].items()
    }
    return json.dumps(view, sort_keys=True, default=str)


def final_diagnostics(verdict: Verdict, app_id: str) -> str:
    """The string YARN keeps after the application is gone."""
    text = verdict.diagnostics
    if not verdict.succeeded:
        if verdict.retryable:
            text = f"{RETRYABLE_MARK} {text}"
        text += f". Logs: yarn logs -applicationId {app_id}"
    return text
