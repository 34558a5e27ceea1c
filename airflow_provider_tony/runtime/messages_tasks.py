"""The messages inside an application: between the executors (and the user code) and the AM.

Why a module of its own: these travel through skein's key-value store on every
beat, written by code that is not trusted (the training script's progress, the
executor's stderr tail) and read by the AM: each one's ``validate`` holds it
to the caps of ``messages_base.py``. ``Usage`` and ``Progress`` also ride into
the state document (``messages_state.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.messages_base import (
    MAX_BEAT_POINTS,
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_STDERR_LINES,
    Message,
    _float_or_none,
    _int_or_none,
    _metric_value,
    _nested,
    _sequence,
    _text,
)


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
    # The uploader's newest checkpoint step on HDFS after its final flush (None: it uploads none, or
    # none yet). A gang restart's drain reads it when the uploader ended on its own before answering.
    checkpoint_step: int | None = None

    def validate(self) -> None:
        self.exit_code = int(self.exit_code)
        self.checkpoint_step = None if self.checkpoint_step is None else int(self.checkpoint_step)
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
