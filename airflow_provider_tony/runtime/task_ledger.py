"""The job tracker's account of its tasks: what the executors and YARN said of each, not yet judged.

Why a module of its own: registrations, heartbeats, exit records, ended
containers and YARN's memory kills each change one task's record, on the AM's
clock, and publish the gang's cluster spec; which of those failures decides
the job is :mod:`~airflow_provider_tony.runtime.failure_policy`'s rule, and
restarting the gang is :class:`~airflow_provider_tony.runtime.state.JobTracker`'s.
Pure like the rest of the tracker: the time is an argument, nothing touches
the network.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_tony.runtime.failure import FailureKind, classify_exit
from airflow_provider_tony.runtime.gpu import assign_gpus
from airflow_provider_tony.runtime.messages import (
    MILESTONE_ALL_USER_STARTED,
    MILESTONE_CLUSTER_PUBLISHED,
    ClusterDocument,
    Heartbeat,
    Progress,
    Registration,
    RestartRecord,
    TaskState,
    Usage,
)
from airflow_provider_tony.runtime.spec import JobSpec, task_of_container
from airflow_provider_tony.runtime.task_records import TaskRecord, Verdict
from airflow_provider_tony.runtime.tf_config import TF_CLUSTER_ROLES, parse_task_id
from airflow_provider_tony.runtime.usage import notes as usage_notes
from airflow_provider_tony.runtime.yarn_exit import MemoryKill

# Roles whose address every TensorFlow member needs, so rendezvous waits for
# them even when untracked (a ps is untracked but must be in the cluster).
RENDEZVOUS_ROLES = frozenset(TF_CLUSTER_ROLES) | {"evaluator"}


class TaskLedger:
    """One job's tasks and what was heard of each: ``JobTracker``'s base, whose ``__init__`` sets up the
    whole tracker's state (the restart fields too, which ``JobTracker`` uses)."""

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
                "the sweep's median rule stopped the trial"
                if verdict.early_stopped is not None
                else "every tracked task finished"
                if self.spec.success_policy == "all_workers"
                else f"{self.spec.decider_task()} finished"
            )
            task.message = f"stopped: {done}"
        else:
            task.state = TaskState.KILLED
            task.message = "stopped by the application master: the job failed"

    def note_artefact(self, text: str) -> None:
        """An event users follow (a checkpoint, the model, a restart): in ``events`` and ``artefacts``."""
        self.events.append(text)
        self.artefacts.append(text)
