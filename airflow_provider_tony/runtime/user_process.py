"""The user's training processes as the executor runs them: its port, their stderr, the exit code.

Why a module of its own: what the AM sees of a task's end is decided here, in
:meth:`UserProcess.wait` (a signal death reported the way a shell reports it, a
stop of ours made retryable, a script that fails after YARN's stop reported as
the stop), and the port dance that lets the user's server
bind the address the executor registered is subtle enough to want one place.
:mod:`~airflow_provider_tony.runtime.executor` starts and waits for it.

A container runs one process, or several as ``torchrun --nproc_per_node`` does (a PyTorch job's
``nproc_per_node``): the same command, each with its own environment (``LOCAL_RANK``, ``RANK``).
They live and die together, with torchrun's semantics: the first to fail stops the others
(SIGTERM, then SIGKILL after ``USER_STOP_S``), and the container's exit is that process's code
with its stderr tail, each line prefixed with its local rank; success only when all exit 0.
"""

from __future__ import annotations

import collections
import logging
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.failure import killed_by_signal
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, REFUSED_PREFIX

log = logging.getLogger("tony.executor")
STDERR_TAIL_LINES = 20
# How long a training process stopped by us (a gang restart's drain, a failed peer process) has to
# save and exit after SIGTERM before it is killed (its checkpoint, if it writes one, counts).
USER_STOP_S = 10.0


def reserve_port() -> socket.socket:
    """Bind an ephemeral port and keep it bound until the user process starts,
    so that nothing else on the node can take it in between (tf-yarn's trick).

    With ``SO_REUSEPORT`` a server of this user that sets it too (TensorFlow's
    gRPC server does) may bind the port while we still hold it: see
    :func:`frameworks.holds_port`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("", 0))
    return sock


def _pump_stderr(stream: Any, tail: collections.deque[str]) -> None:
    """Forward the user's stderr to the container log, keeping its last lines."""
    for raw in iter(stream.readline, b""):
        sys.stderr.buffer.write(raw)
        sys.stderr.buffer.flush()
        tail.append(raw.decode(errors="replace").rstrip("\n"))


class _Member:
    """One process of the container (one local rank): started, its stderr teed and tailed, and its
    end announced on ``done`` (its local rank) by a thread of its own, so the group hears the first
    end of any member without polling."""

    def __init__(
        self,
        local_rank: int,
        argv: list[str],
        env: Mapping[str, str],
        cwd: Path,
        keep_fds: tuple[int, ...],
        done: queue.Queue[int],
    ) -> None:
        self.local_rank = local_rank
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.notes: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.signalled = False  # SIGTERM sent (by us or forwarded from YARN): not sent twice
        try:
            # keep_fds: the GPU leases, held by every training process too, so a
            # GPU stays leased while one runs even if this executor dies first.
            self.proc = subprocess.Popen(
                argv,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=None,
                stderr=subprocess.PIPE,  # never a shell: argv is a list
                pass_fds=keep_fds,
            )
        except OSError as exc:
            self.notes.append(f"could not start {argv[0]!r}: {exc}")
            done.put(local_rank)
            return
        self.pump = threading.Thread(target=_pump_stderr, args=(self.proc.stderr, self.tail), daemon=True)
        self.pump.start()
        threading.Thread(target=self._announce_end, args=(done,), daemon=True).start()

    def _announce_end(self, done: queue.Queue[int]) -> None:
        assert self.proc is not None
        self.proc.wait()
        done.put(self.local_rank)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        """SIGTERM once: a second could interrupt the user's own handler while it saves."""
        if self.running() and not self.signalled:
            assert self.proc is not None
            self.signalled = True
            self.proc.terminate()

    def code(self) -> int:
        """The exit code the way a shell reports it (128 + N for signal N; 127: never started)."""
        if self.proc is None:
            return 127
        code = self.proc.wait()
        return 128 - code if code < 0 else code

    def lines(self, labelled: bool) -> list[str]:
        """Its stderr tail and our notes, each prefixed with the local rank when the container runs several."""
        if self.proc is not None:
            self.pump.join(timeout=5)
        lines = [*self.tail, *self.notes]
        return [f"[local_rank {self.local_rank}] {line}" for line in lines] if labelled else lines


class UserProcess:
    """The user's command in one process, or in one per environment of ``env`` (torchrun's local ranks).

    ``env`` is one mapping, or a sequence of them: process ``k`` (local rank ``k``) gets the
    ``k``-th. All share ``cwd`` and ``keep_fds``; YARN's SIGTERM goes to all.
    """

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str] | Sequence[Mapping[str, str]],
        cwd: Path,
        port_sock: socket.socket,
        keep_fds: list[int] | None = None,
        hold_port: bool = False,
        stop_timeout: float = USER_STOP_S,
    ) -> None:
        envs = [env] if isinstance(env, Mapping) else list(env)
        if not envs:
            raise ValueError("no environment given: a container runs at least one process")
        self.extra: list[str] = []
        self.fail_code = C.TEMPFAIL_EXIT_CODE  # the exit of a stop of ours (``fail``)
        self.stop_timeout = stop_timeout
        self.first_failure: int | None = None  # the local rank whose failure ended the container
        self.stopped_by_yarn = False  # YARN's SIGTERM reached the container (forwarded by ``_forward``)
        # Held through the start where the user's server shares it (hold_port), else released
        # at the last moment: the user's server binds it next.
        self.port_sock: socket.socket | None = port_sock if hold_port else None
        if not hold_port:
            port_sock.close()
        self._done: queue.Queue[int] = queue.Queue()
        fds = tuple(keep_fds or ())
        self.members = [_Member(k, argv, e, cwd, fds, self._done) for k, e in enumerate(envs)]
        if any(m.proc is not None for m in self.members):
            signal.signal(signal.SIGTERM, self._forward)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """Local rank 0's process (the only one unless the job runs several per container)."""
        return self.members[0].proc

    @property
    def pids(self) -> list[int]:
        """Every started process's pid, by local rank: the roots of what the usage sampler measures."""
        return [m.proc.pid for m in self.members if m.proc is not None]

    def _forward(self, signum: int, _frame: object) -> None:
        """YARN stops a container with SIGTERM: pass it on to every process so user code can save and exit."""
        self.stopped_by_yarn = self.stopped_by_yarn or signum == signal.SIGTERM
        for member in self.members:
            if member.running():
                assert member.proc is not None
                member.signalled = member.signalled or signum == signal.SIGTERM
                member.proc.send_signal(signum)

    def stop(self, timeout: float) -> None:
        """Stop the user code and wait for it: SIGTERM (it may save and exit), SIGKILL after ``timeout``."""
        for member in self.members:
            member.terminate()
        self._reap(timeout)

    def _reap(self, timeout: float) -> None:
        """Wait for every process until ``timeout`` from now, then SIGKILL those still running."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            if member.proc is None:
                continue
            try:
                member.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.proc.kill()
                member.proc.wait()

    def fail(self, message: str) -> None:
        """Stop the user code for a reason of ours (e.g. checkpoints cannot be saved).

        The exit is then 75 (retryable), or 77 when the reason is HDFS refusing
        the folder for good (``runtime/hdfs_refusal.py``'s line).
        """
        if message.startswith(REFUSED_PREFIX):
            self.fail_code = HDFS_REFUSED_EXIT_CODE
        self.extra.append(message)
        for member in self.members:
            member.terminate()

    def wait(self) -> tuple[int, list[str]]:
        """Wait for every process; the first failure stops the rest. The exit code and stderr tail the AM sees."""
        for _ in self.members:
            local_rank = self._done.get()
            if self.first_failure is None and self.members[local_rank].code() != 0:
                self.first_failure = local_rank
                self.stop(self.stop_timeout)  # torchrun's semantics: one process down ends them all
        self._release_port()
        decider = self.members[self.first_failure if self.first_failure is not None else 0]
        code = decider.code()
        lines = [*decider.lines(labelled=len(self.members) > 1), *self.extra]
        if self.extra and code in (0, 143):
            code = self.fail_code  # ours: retryable unless HDFS refused the folder
        elif self.stopped_by_yarn and code != 0 and not killed_by_signal(code):
            # YARN stopped the container (memory, preemption, its node) and the script then failed
            # on its own, its working folder already deleted under it: the end is YARN's stop,
            # which the AM holds for YARN's word, never the script's traceback.
            lines.append(f"the container was stopped by YARN (SIGTERM); the script then exited with code {code}")
            code = 128 + signal.SIGTERM
        return code, lines

    def _release_port(self) -> None:
        if self.port_sock is not None:
            self.port_sock.close()
            self.port_sock = None
