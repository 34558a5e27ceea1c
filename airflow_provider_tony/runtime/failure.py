"""What a failed task's end says about its cause: pure rules, no I/O.

Under ``MultiWorkerMirroredStrategy`` every step is a collective, so when one
worker's node dies the survivors' collectives fail within seconds and they
exit 1, long before the AM's heartbeat timeout declares the lost task. Judged
by its first exit code alone such a job fails as a bug in the training code.
The AM therefore classifies each failed task (``classify``) and judges the
failures of one gang together (``JobTracker`` in ``state.py``): a task that
was *lost* (no exit record, missed heartbeats, killed by a signal from outside,
preempted) is the root cause and its peers' failures are consequences, and a task whose
stderr shows TensorFlow's own peer-failure errors is a consequence waiting for
its cause. Facts only: the AM's heartbeat clock, YARN's container status
(``yarn_exit``) and TensorFlow's error text, never a guess from timing alone.
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Iterable

from airflow_provider_tony.runtime.constants import CRASH_SIGNALS, RETRYABLE_EXIT_CODES, SIGNAL_EXIT_CODES
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, REFUSED_PREFIX


class FailureKind(str, enum.Enum):
    """Why one task failed; ``retryable`` says whether running it again can help."""

    LOST = "lost"  # no exit record: container or node lost, or heartbeats stopped
    PREEMPTED = "preempted"  # YARN took the container back for another queue
    OUT_OF_MEMORY = "out_of_memory"  # YARN killed the container over its memory request (exit -104)
    SIGNAL = "signal"  # the user process was killed by a signal from outside (OOM kill 137, SIGTERM 143)
    CRASH = "crash"  # it crashed on its own (SIGABRT 134, SIGSEGV 139): retryable, but no loss
    RETRYABLE_EXIT = "retryable_exit"  # 75 (the executor's own) or one of the job's retryable_exit_codes
    PEER = "peer"  # TensorFlow or PyTorch reported that a peer failed: a consequence, not a cause
    STALLED = "stalled"  # a tracked task's step stopped moving (progress_stall_timeout): a deadlock, likely
    HDFS_REFUSED = "hdfs_refused"  # HDFS refused a write for good (quota, permission): exit 77, runtime/hdfs_refusal.py
    CODE = "code"  # the training code failed on its own (a traceback, bad arguments)

    @property
    def retryable(self) -> bool:
        """A container killed for memory would be killed again with the same request, and HDFS's refusal
        (quota, permission) answers the same to every retry: not retryable (the JobSpec's ``memory_retry``
        lets the operator retry a memory kill with a larger request)."""
        return self not in (FailureKind.CODE, FailureKind.OUT_OF_MEMORY, FailureKind.HDFS_REFUSED)

    @property
    def loss(self) -> bool:
        """The task itself went away: its peers' failures are its consequences."""
        return self in (FailureKind.LOST, FailureKind.PREEMPTED, FailureKind.SIGNAL, FailureKind.OUT_OF_MEMORY)


#: TensorFlow's errors when a peer of a collective, a parameter server or the
#: coordination service goes away (TensorFlow 2.21; the texts come from its
#: collective executor, gRPC and the coordination service), and PyTorch's when
#: a process group's peer or its c10d store does (gloo's TCP pairs, NCCL's
#: watchdog and remote errors, the store and the elastic rendezvous). Each
#: entry is (what it means, pattern over one stderr line).
PEER_FAILURE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a collective was aborted", re.compile(r"Collective ops is aborted|CollectiveOpV\d+Aborted|cancelled collective")),
    ("a collective op failed", re.compile(r"\{\{node Collective\w*\}\}")),
    (
        "a peer is unavailable",
        re.compile(
            r"UnavailableError|StatusCode\.UNAVAILABLE|failed to connect to all addresses|"
            r"Connection reset by peer|Socket closed|Connection refused|Broken pipe|"
            r"RPC to .* failed|recvBuffer failed"
        ),
    ),
    (
        "the coordination service reported a task failure",
        re.compile(
            r"[Cc]oordination service|CoordinationService|heartbeat timeout|has been recorded as failed|"
            r"[Tt]ask .* (?:is|was) not responding|barrier timed out",
        ),
    ),
    (
        "a parameter server or worker was lost",
        re.compile(r"PSUnavailableError|WorkerPreemptionError|ClosureAbortedError"),
    ),
    (
        "a PyTorch process group lost a peer",
        re.compile(
            r"Connection closed by peer|connectFullMesh failed|Timed out waiting \d+ms for (?:recv|send) operation|"
            r"DistBackendError|NCCL communicator was aborted|ncclRemoteError|"
            r"remote process exited or there was a network error|Watchdog caught collective operation timeout"
        ),
    ),
    (
        "PyTorch's store or rendezvous lost a peer",
        re.compile(
            r"DistStoreError|DistNetworkError|Rendezvous(?:Timeout|Closed|Connection)Error|"
            r"waiting for clients\. \d+/\d+ clients joined"
        ),
    ),
)


def peer_failure(stderr_tail: Iterable[str]) -> str | None:
    """What TensorFlow said about a failed peer in a task's stderr, or None.

    The answer names the kind of error and quotes the line (cut to 200
    characters), so a verdict can show why the task counts as a consequence.
    """
    for line in reversed(list(stderr_tail)):
        for meaning, pattern in PEER_FAILURE_PATTERNS:
            if pattern.search(line):
                return f"{meaning}: {line.strip()[:200]}"
    return None


def crash_signal(code: int) -> str | None:
    """The name of the signal a process that crashed on its own died of (``SIGABRT`` for 134), else None.

    Such a death is the process's own end, like an exit code: a survivor whose
    collective library aborts when a peer goes away (gloo's "terminate called
    without an active exception"), or a bug in native code. Only a signal from
    outside (SIGKILL, SIGTERM, SIGHUP...) says the task was taken away.
    """
    signum = -code if code < 0 else code - 128 if code in SIGNAL_EXIT_CODES else None
    return signal.Signals(signum).name if signum in CRASH_SIGNALS else None


def killed_by_signal(code: int) -> bool:
    """Whether an exit code says a signal from outside ended the process (128 + N, or Python's -N)."""
    return (code < 0 or code in SIGNAL_EXIT_CODES) and crash_signal(code) is None


def classify_exit(code: int, stderr_tail: Iterable[str], extra_retryable: Iterable[int] = ()) -> FailureKind:
    """The kind of failure a non-zero exit code (with the task's stderr tail) is.

    77 with the executor's refusal line in the tail is HDFS's refusal
    (``runtime/hdfs_refusal.py``); a script's own 77 is its own failure, and
    one the job lists among its ``retryable_exit_codes`` stays retryable. A
    crash (``crash_signal``: 134, 139...) is a peer's failure when its stderr
    says so, else ``CRASH``: retryable as every code of 128-255 is, but never
    a loss that makes the survivors' failures its consequences.
    """
    tail = list(stderr_tail)
    if (
        code == HDFS_REFUSED_EXIT_CODE
        and code not in set(extra_retryable)
        and any(line.startswith(REFUSED_PREFIX) for line in tail)
    ):
        return FailureKind.HDFS_REFUSED
    if killed_by_signal(code):
        return FailureKind.SIGNAL
    if code == 0:  # the caller's mistake, named, rather than a success counted as a failure of the code
        raise ValueError("exit code 0 is no failure: classify_exit is for a task that exited non-zero")
    if code in RETRYABLE_EXIT_CODES or code in set(extra_retryable):
        return FailureKind.RETRYABLE_EXIT
    if peer_failure(tail) is not None:
        return FailureKind.PEER
    return FailureKind.CRASH if crash_signal(code) else FailureKind.CODE
