"""The user's training process as the executor runs it: its port, its stderr, its exit code.

Why a module of its own: what the AM sees of a task's end is decided here, in
:meth:`UserProcess.wait` (a signal death reported the way a shell reports it, a
stop of ours made retryable), and the port dance that lets the user's server
bind the address the executor registered is subtle enough to want one place.
:mod:`~airflow_provider_tony.runtime.executor` starts and waits for it.
"""

from __future__ import annotations

import collections
import logging
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, REFUSED_PREFIX

log = logging.getLogger("tony.executor")
STDERR_TAIL_LINES = 20


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


class UserProcess:
    """The user's command: started without a shell, stderr teed and tailed."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        port_sock: socket.socket,
        keep_fds: list[int] | None = None,
        hold_port: bool = False,
    ) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra: list[str] = []
        self.fail_code = C.TEMPFAIL_EXIT_CODE  # the exit of a stop of ours (``fail``)
        # Held through the start where the user's server shares it (hold_port), else released
        # at the last moment: the user's server binds it next.
        self.port_sock: socket.socket | None = port_sock if hold_port else None
        if not hold_port:
            port_sock.close()
        try:
            # keep_fds: the GPU leases, held by the training process too, so a
            # GPU stays leased while it runs even if this executor dies first.
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=None,
                stderr=subprocess.PIPE,  # never a shell: argv is a list
                pass_fds=tuple(keep_fds or ()),
            )
        except OSError as exc:
            self.extra.append(f"could not start {argv[0]!r}: {exc}")
            return
        self.pump = threading.Thread(target=_pump_stderr, args=(self.proc.stderr, self.tail), daemon=True)
        self.pump.start()
        signal.signal(signal.SIGTERM, self._forward)

    def _forward(self, signum: int, _frame: object) -> None:
        """YARN stops a container with SIGTERM: pass it on so user code can save and exit."""
        if self.proc is not None:
            self.proc.send_signal(signum)

    def stop(self, timeout: float) -> None:
        """Stop the user code and wait for it: SIGTERM (it may save and exit), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def fail(self, message: str) -> None:
        """Stop the user code for a reason of ours (e.g. checkpoints cannot be saved).

        The exit is then 75 (retryable), or 77 when the reason is HDFS refusing
        the folder for good (``runtime/hdfs_refusal.py``'s line).
        """
        if message.startswith(REFUSED_PREFIX):
            self.fail_code = HDFS_REFUSED_EXIT_CODE
        self.extra.append(message)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait(self) -> tuple[int, list[str]]:
        if self.proc is None:
            self._release_port()
            return 127, self.extra
        code = self.proc.wait()
        self._release_port()
        self.pump.join(timeout=5)
        if code < 0:  # killed by a signal: report it the way a shell would
            code = 128 - code
        if self.extra and code in (0, 143):
            code = self.fail_code  # ours: retryable unless HDFS refused the folder
        return code, [*self.tail, *self.extra]

    def _release_port(self) -> None:
        if self.port_sock is not None:
            self.port_sock.close()
            self.port_sock = None
