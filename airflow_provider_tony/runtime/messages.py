"""Every message the components of a job exchange, as typed objects.

The executors, the AM and the submitting side (client, operator, trigger,
benchmarks) run different code on different hosts and talk through skein's
key-value store. Each message has one class here, built on the JobSpec's
``Model`` base (``model.py``), so that a field is spelt once, producers and consumers share
the spelling, and nobody reads another component's dict by string key:

=====================  ========================  =================================
message                written by                read by
=====================  ========================  =================================
``Progress``           user code (progress.py)   executor -> AM -> clients
``Registration``       executor                  AM (``JobTracker.register``)
``Heartbeat``          executor                  AM (``JobTracker.heartbeat``)
``ExitRecord``         executor                  AM (``JobTracker.exited``)
``EventRecord``        executor                  AM (its event list)
``ClusterDocument``    AM                        executors (TF_CONFIG, GPUs)
``Slot``               AM                        a restarted gang's executors (who they are)
``TokenPointer``       AM (token_refresh.py)     executors (where to read the token)
``DelegationToken``    AM (a 0600 HDFS file)     executors (their WebHDFS client)
``RestartRecord``      AM                        clients (inside the state document)
``Failure``            AM                        clients (the verdict's root cause)
``TaskSummary``        AM                        clients (inside the state document)
``StateDocument``      AM                        client, operator, trigger, bench
``JobHistory``         AM (HTTP, HDFS)           job page, ``tony status``, operator
=====================  ========================  =================================

Compatibility rules (why ``from_dict`` here is lenient where the JobSpec is strict):

* A JobSpec is written by a person, so an unknown key is a typo and is refused.
  A message is written by a program that may be newer than its reader: a
  provider upgraded on the Airflow side re-attaches to an application whose AM
  runs the previous version, and the other way round. So unknown keys are
  ignored and missing keys take their defaults.
* ``StateDocument.version`` is raised when a field changes meaning or is
  removed; adding a field does not raise it. A document without ``version``
  is version 1 (the first layout had none).

Like the rest of ``runtime/``, this module imports only the standard library
(and the model module), because it is shipped into YARN containers.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from airflow_provider_tony.runtime import constants
from airflow_provider_tony.runtime.errors import DocumentVersionError, SpecError
from airflow_provider_tony.runtime.model import Model
from airflow_provider_tony.runtime.model import plain as model_plain

__all__ = [
    "STATE_DOCUMENT_VERSION",
    "AppState",
    "ClusterDocument",
    "Cost",
    "DelegationToken",
    "TokenPointer",
    "Drain",
    "Drained",
    "EventRecord",
    "ExitRecord",
    "GateResult",
    "Failure",
    "Heartbeat",
    "JobHistory",
    "Message",
    "Progress",
    "Registration",
    "RestartRecord",
    "Slot",
    "StateDocument",
    "TaskState",
    "TaskSummary",
]

#: Raised when a field of the state document changes meaning or disappears.
STATE_DOCUMENT_VERSION = 1

# Milestones of ``StateDocument.timeline`` (seconds after the AM started).
MILESTONE_CLUSTER_PUBLISHED = "cluster_published"
MILESTONE_ALL_USER_STARTED = "all_user_started"
MILESTONE_VERDICT = "verdict"

_M = TypeVar("_M", bound="Message")

# Caps on what a container writes (the training code is not trusted: see SECURITY.md).
# Applied when a message is built or read, so a hostile script can neither make its
# executor's key-value put exceed skein's gRPC limit nor flood the AM, the Airflow
# side (trigger event, XCom, task log) or the job page.
#: A serialised state document (or any message but the history) larger than this is refused.
MAX_DOCUMENT_BYTES = 8 << 20
#: The history adds each task's metric points (for the job page).
MAX_HISTORY_BYTES = 16 << 20
MAX_PROGRESS_BYTES = 128 << 10
MAX_METRICS = 64  # metrics per report: the rest are dropped
MAX_NAME_CHARS = 100  # a metric name, a task id, a host
MAX_VALUE_CHARS = 1000  # a metric's text value (a TF_CONFIG a test reports fits)
MAX_TEXT_CHARS = 1000  # an event, a stderr line, a task's message
MAX_STDERR_LINES = 60
MAX_EVENTS = 200  # the newest are kept
MAX_TASKS = constants.MAX_TASKS  # the JobSpec refuses a job with more
MAX_HISTORY_POINTS = 2000  # per task on the job page
MAX_BEAT_POINTS = 64  # recent progress reports a heartbeat or exit record carries
MAX_DIAGNOSTICS_CHARS = 16000


def _text(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` as a string of at most ``limit`` characters (longer ones end in an ellipsis)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MAX_INT = 2**63 - 1  # a step or count beyond a Java long (or a float's range) is not one


def _int_or_none(value: Any) -> int | None:
    """An int from an int, an integral float or a digit string; None for anything else (``step="ten"``)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if abs(value) <= _MAX_INT else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_INT:
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        return int(value)
    return None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _metric_value(value: Any) -> Any:
    """A metric as JSON has it: numbers and booleans as they are, anything else as short text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _MAX_INT else _text(value, MAX_VALUE_CHARS)  # float() of it would overflow
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return _text(value, MAX_VALUE_CHARS)


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(where, f"{type(value).__name__} where a JSON object belongs")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SpecError(where, f"{type(value).__name__} where a JSON list belongs")
    return list(value)


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


class Message(Model):
    """A ``Model`` whose ``from_dict`` tolerates unknown and missing keys (see the module doc)."""

    def validate(self) -> None:
        """Nothing to check by default; nested messages are coerced by their parent."""

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins, like ``Model.to_dict``, by a faster path: the AM turns its whole
        state document (a summary per task) into a dict on every tick."""
        return {name: _plain(getattr(self, name)) for name in _field_names(type(self))}

    @classmethod
    def from_dict(cls: type[_M], data: object, field: str = "") -> _M:
        if not isinstance(data, Mapping):
            raise SpecError(
                field or cls.__name__,
                f"{data!r} is a {type(data).__name__}, not a mapping; a {cls.__name__} message is a JSON object",
            )
        known = _field_names(cls)
        if "version" in known:
            _check_version(cls, data.get("version"), field)
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except SpecError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # missing or mistyped fields
            raise SpecError(
                field or cls.__name__,
                f"{cls.__name__} message is incomplete or mistyped ({_text(exc, 300)}); "
                "it was written by an incompatible version of the provider, or by something else",
            ) from None

    def to_json(self) -> bytes:
        """The bytes that go into skein's key-value store."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls: type[_M], raw: bytes | str, max_bytes: int = MAX_DOCUMENT_BYTES) -> _M:
        """The message from its JSON; refused (``SpecError``) when larger than ``max_bytes``."""
        if len(raw) > max_bytes:
            raise SpecError(cls.__name__, f"{len(raw)} bytes, more than the {max_bytes} allowed; ignored")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SpecError(cls.__name__, f"not JSON ({exc}); the message was truncated or corrupted") from None
        return cls.from_dict(data)


def _check_version(cls: type[Message], version: object, where: str) -> None:
    """Refuse a versioned message (``StateDocument``, ``JobHistory``) from a newer major version.

    The version is raised only when a field changes meaning or disappears
    (see the module doc), so a newer one cannot be read right; an older or
    equal one, or none (version 1), can.
    """
    known = cls.__dataclass_fields__["version"].default  # type: ignore[attr-defined]
    major = _int_or_none(version)
    if major is not None and major > known:  # absent (the first layout had none) or older: readable
        raise DocumentVersionError(
            _join_field(where, "version"),
            f"a {cls.__name__} of layout version {major}, newer than the {known} this provider reads; "
            "it was written by a newer version of airflow-provider-tony: upgrade the provider here "
            "(on the Airflow workers and triggerer, or where the CLI runs)",
        )


def _join_field(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A message class's field names, computed once per class (``fields()`` is slow on every tick)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _plain(value: Any) -> Any:
    """Builtins for JSON: concrete types first (``isinstance`` on ``Mapping`` is slow)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return model_plain(value)


def _nested(value: Any, cls: type[_M], where: str) -> _M | None:
    """A nested message from its object or dict form (None stays None)."""
    if value is None or isinstance(value, cls):
        return value
    return cls.from_dict(value, where)


@dataclass
class Progress(Message):
    """What a training script last reported through ``progress.report``."""

    step: int | None = None
    epoch: int | None = None
    total_steps: int | None = None
    time: float | None = None  # wall clock of the report, on the task's host
    metrics: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Types and sizes enforced: the training script wrote this (``step="ten"`` becomes None,
        the first ``MAX_METRICS`` metrics are kept, names and texts are cut short)."""
        self.step = _int_or_none(self.step)
        self.epoch = _int_or_none(self.epoch)
        self.total_steps = _int_or_none(self.total_steps)
        self.time = _float_or_none(self.time)
        metrics = self.metrics if isinstance(self.metrics, Mapping) else {}
        if len(metrics) <= MAX_METRICS and all(
            isinstance(k, str) and len(k) <= MAX_NAME_CHARS and isinstance(v, (float, bool, type(None)))
            for k, v in metrics.items()
        ):
            self.metrics = {k: _metric_value(v) for k, v in metrics.items()}  # the usual case, fast
        else:
            self.metrics = {_text(k, MAX_NAME_CHARS): _metric_value(v) for k, v in list(metrics.items())[:MAX_METRICS]}

    def key(self) -> tuple[Any, ...]:
        """What identifies one report: a new step, epoch or report time means progress."""
        return (self.step, self.epoch, self.time)

    def fraction(self) -> float | None:
        """``step / total_steps`` when both are known, else None."""
        step, total = self.step, self.total_steps
        if isinstance(step, (int, float)) and isinstance(total, (int, float)) and total > 0:
            return step / total
        return None


def _points(value: Any) -> list[Progress]:
    """A message's window of recent reports: the newest ``MAX_BEAT_POINTS``."""
    return [_nested(p, Progress, "points") or Progress() for p in _sequence(value, "points")[-MAX_BEAT_POINTS:]]


@dataclass
class Usage(Message):
    """What a task's training process tree used (``runtime.usage``), over the samples so far.

    The executor measures; the AM adds what the role requested (from its own
    JobSpec) and ``notes`` for a request used under half, so the page and the
    XCom show use beside request.
    """

    samples: int = 0
    seconds: float = 0.0  # from the first sample to the last
    peak_rss_bytes: int | None = None  # resident memory of the whole tree at its highest
    cpu_seconds: float | None = None
    peak_cpu_cores: float | None = None  # the highest CPU rate between two samples, in cores
    mean_cpu_cores: float | None = None
    peak_gpu_util: float | None = None  # %, the task's GPUs averaged, at its highest (None: no nvidia-smi)
    mean_gpu_util: float | None = None
    peak_gpu_memory_bytes: int | None = None
    gpus_seen: int | None = None  # GPUs nvidia-smi reported for the task
    requested_memory_mib: int | None = None
    requested_vcores: int | None = None
    requested_gpus: int | None = None
    notes: list[str] = field(default_factory=list)

    def validate(self) -> None:
        self.samples = _int_or_none(self.samples) or 0
        self.seconds = _float_or_none(self.seconds) or 0.0
        for name in ("peak_rss_bytes", "peak_gpu_memory_bytes", "gpus_seen"):
            setattr(self, name, _int_or_none(getattr(self, name)))
        for name in ("requested_memory_mib", "requested_vcores", "requested_gpus"):
            setattr(self, name, _int_or_none(getattr(self, name)))
        for name in ("cpu_seconds", "peak_cpu_cores", "mean_cpu_cores", "peak_gpu_util", "mean_gpu_util"):
            setattr(self, name, _float_or_none(getattr(self, name)))
        self.notes = [_text(n) for n in _sequence(self.notes, "notes")[:8]]


@dataclass
class Registration(Message):
    """An executor's address, written once before it waits for the cluster spec."""

    host: str
    port: int
    pid: int | None = None
    container_id: str | None = None
    gpus_local: list[str] = field(default_factory=list)  # GPUs the executor saw on its node
    gpus_pinned: list[str] | None = None  # NVIDIA_VISIBLE_DEVICES of the container, if set
    generation: int = 0  # the gang this executor belongs to (0 until the AM restarts it)
    nm_http_port: int | None = None  # its NodeManager's web port (runtime/nm_probe.py asks it)

    def validate(self) -> None:
        self.host = str(self.host)
        self.port = int(self.port)
        raw: Any = self.nm_http_port  # the JSON a container wrote: checked here
        self.nm_http_port = None if raw is None or raw == "" else int(raw)
        self.gpus_local = [str(g) for g in self.gpus_local or []]
        self.gpus_pinned = None if self.gpus_pinned is None else [str(g) for g in self.gpus_pinned]


@dataclass
class Heartbeat(Message):
    """An executor's beat: only ``seq`` moving counts (hosts' clocks are not compared)."""

    seq: int = 0
    time: float | None = None
    user_started: bool = False
    restored_step: int | None = None
    progress: Progress | None = None
    generation: int = 0
    points: list[Progress] = field(default_factory=list)  # the script's recent reports, oldest first
    usage: Usage | None = None  # what the training process used so far

    def validate(self) -> None:
        self.progress = _nested(self.progress, Progress, "progress")
        self.points = _points(self.points)
        self.usage = _nested(self.usage, Usage, "usage")


@dataclass
class ExitRecord(Message):
    """How a task's user code ended; it carries the last progress (final metrics land late)."""

    exit_code: int = 1
    stderr_tail: list[str] = field(default_factory=list)
    time: float | None = None
    progress: Progress | None = None
    generation: int = 0
    points: list[Progress] = field(default_factory=list)  # the script's recent reports, oldest first
    usage: Usage | None = None  # what the training process used, to its end

    def validate(self) -> None:
        self.exit_code = int(self.exit_code)
        tail = _sequence(self.stderr_tail, "stderr_tail")[-MAX_STDERR_LINES:]
        self.stderr_tail = [_text(line) for line in tail]
        self.progress = _nested(self.progress, Progress, "progress")
        self.points = _points(self.points)
        self.usage = _nested(self.usage, Usage, "usage")


@dataclass
class EventRecord(Message):
    """A line for the AM's event list.

    ``artefact`` marks what users follow in the task log and the XCom result
    (checkpoint restores and uploads, the model export): the AM lists those
    in ``StateDocument.artefacts`` as well, so readers select them by this
    field rather than by searching the text.
    """

    message: str = ""
    artefact: bool = False

    def validate(self) -> None:
        self.message = _text(self.message)
        self.artefact = bool(self.artefact)


@dataclass
class ClusterDocument(Message):
    """The cluster spec executors wait for: every address, GPU grants, role sizes."""

    addresses: dict[str, str] = field(default_factory=dict)  # task id -> "host:port"
    gpus: dict[str, list[str]] = field(default_factory=dict)  # task id -> GPU ids granted
    num_tasks: dict[str, int] = field(default_factory=dict)  # role -> instances
    generation: int = 0  # an executor of another gang keeps waiting


@dataclass
class Slot(Message):
    """Who a replacement container is: skein numbers a service's containers on
    (``worker_2`` replaces ``worker_0``), so the AM says which task and gang it serves."""

    task_id: str = ""
    generation: int = 0


@dataclass
class Drain(Message):
    """The AM's request, before it stops a gang, that its checkpoint uploader finish first.

    Without it a checkpoint saved just before a failure, still on the
    uploader's local disk or half uploaded, dies with the gang and the new gang
    redoes two checkpoint intervals instead of at most one.
    """

    generation: int = 0


@dataclass
class Drained(Message):
    """The uploader's answer to a ``Drain``: the newest checkpoint step now on HDFS."""

    generation: int = 0
    step: int | None = None  # None: no checkpoint uploaded by this gang
    complete: bool = True  # False: the newest local checkpoint could not be uploaded in time
    error: str = ""
    last_step: int | None = None  # the step the training process had reached when it was stopped


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
class DelegationToken(Message):
    """An HDFS delegation token the AM obtained from the job's keytab, for the executors' WebHDFS clients.

    ``token`` is a secret (Hadoop's URL string): it is written only to a 0600
    HDFS file of the job's user (see :class:`TokenPointer`), never to the
    key-value store, the state document, an event or a log, and the ``repr``
    leaves it out. Dates are seconds since the epoch.
    """

    token: str = field(default="", repr=False)
    seq: int = 0  # moves with every new token: an executor takes a token newer than the one it uses
    issued: float | None = None
    expires: float | None = None  # when it stops working unless renewed, as WebHDFS answered the renewal
    max_date: float | None = None  # when it stops working whatever happens (its maximum lifetime)

    def validate(self) -> None:
        self.token = str(self.token or "")
        self.seq = int(self.seq)


#: The longest HDFS path a TokenPointer may name.
MAX_POINTER_PATH_CHARS = 1000


@dataclass
class TokenPointer(Message):
    """Where the AM wrote its newest :class:`DelegationToken`: the only part of a refresh in the key-value store.

    skein's web UI lists every value of that store (``<rm>/proxy/<app>/kv``) to
    anyone with view rights on the application, so the token itself lives in a
    0600 file of the job user's staging folder (``~/.skein/<app>/``), which an
    executor reads over WebHDFS with the token it holds. ``path`` is absolute
    and has no ``.``/``..`` component; ``seq`` is the token's ``seq``.
    """

    path: str = ""
    seq: int = 0

    def validate(self) -> None:
        path = self.path if isinstance(self.path, str) else ""
        if not path.startswith("/") or len(path) > MAX_POINTER_PATH_CHARS or not path.isprintable():
            raise SpecError("TokenPointer.path", f"{_text(path, 80)!r} is not an absolute HDFS path; ignored")
        if any(part in (".", "..") for part in path.split("/")):
            raise SpecError("TokenPointer.path", f"{_text(path, 80)!r} has a '.' or '..' component; ignored")
        self.path = path
        seq = _int_or_none(self.seq)
        if seq is None or seq < 0:
            raise SpecError("TokenPointer.seq", f"{_text(self.seq, 40)!r} is not a token's sequence number; ignored")
        self.seq = seq


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

    def validate(self) -> None:
        self.metric = _text(self.metric, MAX_NAME_CHARS)
        self.mode = _text(self.mode, 10)
        self.value = _float_or_none(self.value)
        self.previous = _float_or_none(self.previous)
        self.previous_model_dir = _text(self.previous_model_dir, 1000)
        self.previous_application_id = _text(self.previous_application_id, MAX_NAME_CHARS)
        self.passed = self.passed is True
        self.within_tolerance = self.within_tolerance is True
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
