"""The AM's records: one task's (``TaskRecord``) and the job's ending (``Verdict``).

Why a module of its own: these are the plain data the job tracker's parts
(:mod:`~airflow_provider_tony.runtime.task_ledger`,
:mod:`~airflow_provider_tony.runtime.failure_policy`,
:mod:`~airflow_provider_tony.runtime.state`) share and the AM reads, with how
each becomes a message of the state document (``TaskSummary``, ``Failure``);
no rule of the failure policy is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime.constants import RETRYABLE_EXIT_CODES, SIGNAL_EXIT_CODES
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.messages import EarlyStop, Failure, Progress, TaskState, TaskSummary, Usage
from airflow_provider_tony.runtime.yarn_exit import MemoryKill


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
    # A success the sweep's median rule decided (``early_stopping``): the trial was stopped on purpose.
    early_stopped: EarlyStop | None = None

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
