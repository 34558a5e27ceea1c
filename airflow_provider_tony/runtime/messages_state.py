"""The AM's account of a job for the submitting side: the state document, its parts, the job's history.

Why a module of its own: these are what the client, the operator, the trigger,
``tony status`` and the job page read, possibly written by an AM of another
provider version (hence ``STATE_DOCUMENT_VERSION``), and what a failed job's
root cause (``Failure``) and a run's cost (``Cost``) travel in to Airflow.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.messages_base import (
    MAX_DIAGNOSTICS_CHARS,
    MAX_EVENTS,
    MAX_HISTORY_POINTS,
    MAX_NAME_CHARS,
    MAX_STDERR_LINES,
    MAX_TASKS,
    Message,
    _float_or_none,
    _int_or_none,
    _mapping,
    _nested,
    _sequence,
    _text,
)
from airflow_provider_tony.runtime.messages_tasks import Progress, Usage

#: Raised when a field of the state document changes meaning or disappears.
STATE_DOCUMENT_VERSION = 1

# Milestones of ``StateDocument.timeline`` (seconds after the AM started).
MILESTONE_CLUSTER_PUBLISHED = "cluster_published"
MILESTONE_ALL_USER_STARTED = "all_user_started"
MILESTONE_VERDICT = "verdict"


class TaskState(str, enum.Enum):
    PENDING = "PENDING"  # no registration yet (container requested or starting)
    REGISTERED = "REGISTERED"  # executor registered, waiting for the cluster spec
    RUNNING = "RUNNING"  # user code started (first heartbeat after the cluster spec)
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"  # stopped by the AM after the job failed
    STOPPED = "STOPPED"  # stopped by the AM because the job succeeded (the chief finished): not a failure
    LOST = "LOST"  # missed heartbeats, or the container ended without an exit record
    RESTARTING = "RESTARTING"  # stopped by the AM to restart the whole gang

    @property
    def finished(self) -> bool:
        return self in (
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
            TaskState.STOPPED,
            TaskState.LOST,
            TaskState.RESTARTING,
        )


class AppState(str, enum.Enum):
    REGISTERING = "REGISTERING"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"  # a retryable failure: the gang is being replaced inside the application
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


@dataclass
class Cost(Message):
    """What an application used, from the ResourceManager's final report: resource-seconds (YARN's
    ``resourceSecondsMap``; memory in MiB-seconds as YARN counts it), and the share taken back by
    preemption. What a platform team charges a run by."""

    vcore_seconds: int = 0
    memory_mb_seconds: int = 0
    gpu_seconds: int = 0
    preempted_vcore_seconds: int = 0
    preempted_memory_mb_seconds: int = 0
    preempted_gpu_seconds: int = 0
    final: bool = False  # no container of the application runs any more: the figures no longer grow

    def validate(self) -> None:
        self.final = self.final is True
        for name in (
            "vcore_seconds",
            "memory_mb_seconds",
            "gpu_seconds",
            "preempted_vcore_seconds",
            "preempted_memory_mb_seconds",
            "preempted_gpu_seconds",
        ):
            value = _int_or_none(getattr(self, name))
            setattr(self, name, value if value is not None and value >= 0 else 0)

    def line(self) -> str:
        """The task log's words for it."""
        text = (
            f"{self.vcore_seconds} vcore-seconds, {self.memory_mb_seconds} MB-seconds, {self.gpu_seconds} GPU-seconds"
        )
        preempted = (self.preempted_vcore_seconds, self.preempted_memory_mb_seconds, self.preempted_gpu_seconds)
        if any(preempted):
            text += f" (preempted: {preempted[0]} vcore-seconds, {preempted[1]} MB-seconds, {preempted[2]} GPU-seconds)"
        return text


@dataclass
class Failure(Message):
    """The root cause of a failed gang, decided once by the AM from what happened to every task.

    ``kind`` is a ``runtime.failure.FailureKind`` value (kept a str: a newer AM
    may add kinds); ``consequences`` are the tasks whose failures followed from
    it (a survivor's collective aborted when its peer's node was lost).
    """

    kind: str = ""
    retryable: bool = False
    task_id: str | None = None
    exit_code: int | None = None
    message: str = ""
    consequences: list[str] = field(default_factory=list)
    # An ``out_of_memory`` failure: what the task used (YARN's figure when it killed the container),
    # what its role asked for, and the JobSpec field to raise (``roles.<role>.memory``).
    peak_mib: int | None = None
    requested_mib: int | None = None
    fix_field: str | None = None

    def validate(self) -> None:
        self.kind = _text(self.kind, 40)
        self.retryable = bool(self.retryable)
        self.task_id = None if self.task_id is None else _text(self.task_id, MAX_NAME_CHARS)
        self.exit_code = _int_or_none(self.exit_code)
        self.message = _text(self.message, MAX_DIAGNOSTICS_CHARS)
        self.consequences = [_text(t, MAX_NAME_CHARS) for t in _sequence(self.consequences, "consequences")[:MAX_TASKS]]
        self.peak_mib = _int_or_none(self.peak_mib)
        self.requested_mib = _int_or_none(self.requested_mib)
        self.fix_field = None if self.fix_field is None else _text(self.fix_field, MAX_NAME_CHARS + 16)


@dataclass
class RestartRecord(Message):
    """One in-application restart of the gang: what failed, when, where it resumed."""

    attempt: int = 1  # 1 for the first restart
    failed_task: str = ""  # the root cause: the lost task, not the first one to exit
    reason: str = ""
    cause: str = ""  # the root cause's FailureKind value ("lost", "signal", ...)
    consequences: list[str] = field(default_factory=list)  # tasks that failed because of it
    host: str | None = None  # where the failed task ran (new containers avoid it where YARN can)
    at: float = 0.0  # seconds after the AM started
    at_wall: float | None = None
    last_step: int | None = None  # the decider's last reported step before the failure
    resumed_step: int | None = None  # checkpoint step the new gang restored (None: from scratch / not yet)
    resumed_at: float | None = None  # seconds after the AM started when every task ran user code again
    drained_step: int | None = None  # newest checkpoint the uploader had on HDFS when the gang was stopped
    drain_seconds: float | None = None  # how long the AM waited for that upload (None: nothing to wait for)
    moved: dict[str, str] = field(default_factory=dict)  # task id -> the lost host its new container avoided

    def validate(self) -> None:
        self.failed_task = _text(self.failed_task, MAX_NAME_CHARS)
        self.reason = _text(self.reason)
        self.cause = _text(self.cause, 40)
        self.consequences = [_text(t, MAX_NAME_CHARS) for t in _sequence(self.consequences, "consequences")[:MAX_TASKS]]
        self.host = None if self.host is None else _text(self.host, 255)
        moved = list(_mapping(self.moved, "moved").items())[:MAX_TASKS]
        self.moved = {_text(k, MAX_NAME_CHARS): _text(v, 255) for k, v in moved}

    @property
    def preempted(self) -> bool:
        """YARN preempted the root cause's container for another queue (``cause`` "preempted"): the
        cluster's decision, so this restart does not count against max_restarts, and the new gang
        waits for capacity."""
        return self.cause == "preempted"


@dataclass
class EarlyStop(Message):
    """A trial stopped on purpose by the sweep's median rule (``early_stopping``, ``runtime/median_stop.py``).

    Its metric at ``step`` was strictly worse than the ``median`` of the
    ``finished_trials`` finished trials' values at that step. The job then
    succeeds with no model to publish: the operator skips the quality gate.
    """

    step: int = 0
    metric: str = ""
    value: float = 0.0
    median: float = 0.0
    finished_trials: int = 0

    def validate(self) -> None:
        self.step = _int_or_none(self.step) or 0
        self.metric = _text(self.metric, MAX_NAME_CHARS)
        self.value = _float_or_none(self.value) or 0.0
        self.median = _float_or_none(self.median) or 0.0
        self.finished_trials = _int_or_none(self.finished_trials) or 0

    def line(self) -> str:
        """The words for it, in the verdict and the task log."""
        return (
            f"stopped early by the median rule at step {self.step}: {self.metric} {self.value:g} is worse than "
            f"the median {self.median:g} of {self.finished_trials} finished trial(s) at that step"
        )


@dataclass
class TaskSummary(Message):
    """One task as the AM publishes it in the state document."""

    state: str = TaskState.PENDING.value  # a TaskState value (kept a str: a newer AM may add states)
    role: str = ""
    index: int = 0
    tracked: bool = True
    host: str | None = None
    port: int | None = None
    container_id: str | None = None
    gpus: list[str] = field(default_factory=list)
    seconds_since_heartbeat: float | None = None
    exit_code: int | None = None
    progress: Progress | None = None
    stderr_tail: list[str] = field(default_factory=list)
    message: str = ""
    restored_step: int | None = None
    usage: Usage | None = None  # what its training process used, beside what the role requested

    def validate(self) -> None:
        self.state = _text(self.state.value if isinstance(self.state, TaskState) else self.state, 40)
        self.role = _text(self.role, MAX_NAME_CHARS)
        self.index = int(self.index)
        self.host = None if self.host is None else _text(self.host, 255)
        self.port = _int_or_none(self.port)
        self.container_id = None if self.container_id is None else _text(self.container_id, MAX_NAME_CHARS)
        self.gpus = [_text(g, 20) for g in _sequence(self.gpus, "gpus")[:64]]
        self.seconds_since_heartbeat = _float_or_none(self.seconds_since_heartbeat)
        self.exit_code = _int_or_none(self.exit_code)
        self.progress = _nested(self.progress, Progress, "progress")
        self.stderr_tail = [_text(line) for line in _sequence(self.stderr_tail, "stderr_tail")[-MAX_STDERR_LINES:]]
        self.message = _text(self.message)
        self.restored_step = _int_or_none(self.restored_step)
        self.usage = _nested(self.usage, Usage, "usage")

    @property
    def failed(self) -> bool:
        """Failed or lost: the tasks whose logs explain a failure."""
        return self.state in (TaskState.FAILED.value, TaskState.LOST.value)


@dataclass
class StateDocument(Message):
    """The AM's account of the job, published under ``tony/state``."""

    application_id: str = ""
    app_state: str = AppState.REGISTERING.value  # an AppState value
    am_heartbeat: float | None = None  # the AM's wall clock at publication
    seq: int = 0  # moves on every publication: a client's proof that the AM is alive
    elapsed: float = 0.0
    final: bool = False  # the verdict is in; the AM waits for a client's acknowledgement
    diagnostics: str = ""
    retryable: bool = False
    failure: Failure | None = None  # the failed verdict's root cause (None while running or on success)
    progress: float = 0.0  # 0..1, as YARN shows it
    tasks: dict[str, TaskSummary] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    # The events users follow (checkpoints restored and uploaded, the model exported, gang restarts), as
    # the AM marked them: also in ``events``, for the full account.
    artefacts: list[str] = field(default_factory=list)
    timeline: dict[str, float] = field(default_factory=dict)  # milestone -> seconds after AM start
    am_started_wall: float | None = None
    generation: int = 0  # restarts so far; 0 is the gang started with the application
    restarts: list[RestartRecord] = field(default_factory=list)
    # Set when the sweep's median rule stopped the job (``early_stopping``): it succeeded with no model.
    early_stopped: EarlyStop | None = None
    version: int = STATE_DOCUMENT_VERSION

    def validate(self) -> None:
        """Types and caps enforced (``MAX_TASKS``, ``MAX_EVENTS``, text lengths): the Airflow side
        reads this from a container; a document that breaks them raises ``SpecError``."""
        self.application_id = _text(self.application_id, MAX_NAME_CHARS)
        self.app_state = _text(self.app_state.value if isinstance(self.app_state, AppState) else self.app_state, 40)
        self.am_heartbeat = _float_or_none(self.am_heartbeat)
        self.elapsed = float(self.elapsed)
        self.final = bool(self.final)
        self.diagnostics = _text(self.diagnostics, MAX_DIAGNOSTICS_CHARS)
        self.progress = float(self.progress)
        tasks = _mapping(self.tasks, "tasks")
        if len(tasks) > MAX_TASKS:
            raise SpecError("tasks", f"{len(tasks)} tasks, more than the {MAX_TASKS} a document may hold")
        self.tasks = {
            _text(tid, MAX_NAME_CHARS): _nested(t, TaskSummary, f"tasks.{tid}") or TaskSummary()
            for tid, t in tasks.items()
        }
        restarts = _sequence(self.restarts, "restarts")[-MAX_EVENTS:]
        self.restarts = [_nested(r, RestartRecord, "restarts") or RestartRecord() for r in restarts]
        self.events = [_text(e) for e in _sequence(self.events, "events")[-MAX_EVENTS:]]
        self.artefacts = [_text(e) for e in _sequence(self.artefacts, "artefacts")[-MAX_EVENTS:]]
        self.timeline = {
            _text(k, MAX_NAME_CHARS): float(v) for k, v in list(_mapping(self.timeline, "timeline").items())[:64]
        }
        self.am_started_wall = _float_or_none(self.am_started_wall)
        self.failure = _nested(self.failure, Failure, "failure")
        self.early_stopped = _nested(self.early_stopped, EarlyStop, "early_stopped")

    def task(self, task_id: str) -> TaskSummary | None:
        return self.tasks.get(task_id)

    def milestone_wall(self, name: str) -> float | None:
        """Wall-clock time at which a timeline milestone was reached, if it was."""
        if name not in self.timeline or self.am_started_wall is None:
            return None
        return self.am_started_wall + self.timeline[name]

    def artefact_events(self) -> list[str]:
        """Events users care about in a task log: checkpoints restored/uploaded, the model exported, restarts.

        The AM's own selection (``artefacts``, from ``EventRecord.artefact`` and its restart
        records); an AM from before that field publishes none.
        """
        return list(self.artefacts)


@dataclass
class GateResult(Message):
    """The quality gate's verdict on a job's model: both figures, and whether it was published.

    Decided by the submitting side after the job succeeded
    (``runtime.gate.judge``); kept in the job's history so the page shows it.
    """

    metric: str = ""
    mode: str = "max"
    value: float | None = None  # this run's figure (None: the script did not report the metric)
    previous: float | None = None  # the last published model's (None: there was none)
    previous_model_dir: str = ""
    previous_application_id: str = ""
    passed: bool = False
    model_dir: str = ""  # where this run's model is now: the published folder, or the rejected copy
    reason: str = ""
    within_tolerance: bool = False  # passed although worse than the published model (quality_gate.tolerance)
    awaiting_approval: bool = False  # within tolerance, held as a candidate for a person (quality_gate.approval)

    def validate(self) -> None:
        self.metric = _text(self.metric, MAX_NAME_CHARS)
        self.mode = _text(self.mode, 10)
        self.value = _float_or_none(self.value)
        self.previous = _float_or_none(self.previous)
        self.previous_model_dir = _text(self.previous_model_dir, 1000)
        self.previous_application_id = _text(self.previous_application_id, MAX_NAME_CHARS)
        self.passed = self.passed is True
        self.within_tolerance = self.within_tolerance is True
        self.awaiting_approval = self.awaiting_approval is True
        self.model_dir = _text(self.model_dir, 1000)
        self.reason = _text(self.reason, 1000)


@dataclass
class JobHistory(Message):
    """The state document plus each task's bounded metric history: what the job page draws.

    The AM serves it while the job runs and writes the final one to HDFS, so
    the page, ``tony status`` and the XCom result outlive YARN's memory of the
    application. ``metrics`` maps a task id to its reports, oldest first.
    """

    state: StateDocument | None = None
    metrics: dict[str, list[Progress]] = field(default_factory=dict)
    name: str = ""
    user: str = ""
    nm_http_port: str = ""  # the NodeManagers' web port, for links to container logs
    attempt: int = 1  # the Airflow try number that submitted the job (TONY_ATTEMPT)
    version: int = STATE_DOCUMENT_VERSION
    gate: GateResult | None = None  # the quality gate's verdict, added by the submitting side after the job

    def validate(self) -> None:
        self.state = _nested(self.state, StateDocument, "state")
        self.gate = _nested(self.gate, GateResult, "gate")
        metrics = _mapping(self.metrics, "metrics")
        if len(metrics) > MAX_TASKS:
            raise SpecError("metrics", f"{len(metrics)} tasks, more than the {MAX_TASKS} a history may hold")
        self.metrics = {
            _text(tid, MAX_NAME_CHARS): [
                _nested(p, Progress, "metrics") or Progress()
                for p in _sequence(points, "metrics")[-MAX_HISTORY_POINTS:]
            ]
            for tid, points in metrics.items()
        }
        self.name = _text(self.name, 300)
        self.user = _text(self.user, MAX_NAME_CHARS)
        self.nm_http_port = _text(self.nm_http_port, 10)
        self.attempt = _int_or_none(self.attempt) or 1
