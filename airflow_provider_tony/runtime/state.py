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

The tracker is built in layers, one module each: ``task_records.py`` (the
records), ``task_ledger.py`` (what executors and YARN said of each task),
``failure_policy.py`` (what decides the job), and here ``JobTracker`` itself:
the verdict, gang restarts and the state document. This module re-exports the
names the AM and tests import from it.
"""

from __future__ import annotations

import json

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.failure_policy import FailurePolicy
from airflow_provider_tony.runtime.messages import (
    MILESTONE_VERDICT,
    AppState,
    EarlyStop,
    RestartRecord,
    StateDocument,
    TaskState,
)
from airflow_provider_tony.runtime.task_records import Verdict as Verdict
from airflow_provider_tony.runtime.task_records import exit_code_retryable as exit_code_retryable

# Restarts after a preemption do not count against max_restarts, but a queue
# that preempts a job over and over must not keep it alive forever: past this
# many, a preemption ends the job as retryable (Airflow's retry decides).
MAX_PREEMPTION_RESTARTS = 20


class JobTracker(FailurePolicy):
    """Registrations, heartbeats, exits and the failure policy of one job."""

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

    def stop_early(self, stop: EarlyStop, now: float) -> Verdict | None:
        """The sweep's median rule stopped this trial (``early_stopping``): a success on purpose, with no model.

        Only while no verdict is in and no restart is pending: a job already decided
        stays decided, and a gang being replaced reports no steps to judge.
        """
        if self.verdict is None and self.restart_pending is None:
            self.verdict = Verdict(True, stop.line(), early_stopped=stop)
            self.timeline[MILESTONE_VERDICT] = round(now - self.started, 3)
            self.note_artefact(stop.line())
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
        lost = failed.state is TaskState.LOST or failed.kind is FailureKind.SIGNAL
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
            early_stopped=verdict.early_stopped if verdict else None,
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
