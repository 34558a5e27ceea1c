"""The failure policy: when a silent task is lost, which failure is the root cause, when the job succeeded.

Why a module of its own: these are the rules that decide a job's outcome,
each a method of :class:`FailurePolicy` over the tasks the
:class:`~airflow_provider_tony.runtime.task_ledger.TaskLedger` holds, driven
with explicit clocks by table-driven tests; ``JobTracker.check`` asks
``_decide`` and either ends the job or restarts the gang.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_tony.runtime.blame import BLAMED_MIN_SILENCE_S, BLAMED_MISSED_BEATS, blamed
from airflow_provider_tony.runtime.failure import FailureKind, crash_signal, peer_failure
from airflow_provider_tony.runtime.messages import TaskState
from airflow_provider_tony.runtime.task_ledger import TaskLedger
from airflow_provider_tony.runtime.task_records import TaskRecord, Verdict
from airflow_provider_tony.runtime.tf_config import TF_CLUSTER_ROLES


def _stderr_line(tail: list[str]) -> str:
    lines = [line for line in tail if line.strip()]
    return lines[-1].strip()[:500] if lines else "(no stderr)"


def _earliest(tasks: list[TaskRecord]) -> TaskRecord:
    """The failed task the AM learned of first (every failure is numbered when it is seen)."""
    return min(tasks, key=lambda t: t.failed_seq)


class FailurePolicy(TaskLedger):
    """The rules that turn the tasks' records into a verdict (or none yet); the base of ``JobTracker``."""

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
            crashed = crash_signal(root.exit_code) if root.exit_code is not None else None
            how = f" ({crashed}: it crashed)" if crashed else ""
            text = (
                f"{root.task_id} exited with code {root.exit_code}{how} on {where}; "
                f"last stderr line: {_stderr_line(root.stderr_tail)}"
            )
            blamed = peer_failure(root.stderr_tail) if kind is FailureKind.PEER else None
            if blamed:
                text += f" (its framework blames a peer, none was seen lost: {blamed})"
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
