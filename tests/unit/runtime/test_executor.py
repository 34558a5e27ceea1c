"""The executor's exit mapping: what code the AM sees for the ways a task can end.

A real child process stands for the user's script (no YARN, no HDFS): the
mapping is what makes a task killed while its checkpoints could not be saved
retryable (75) instead of successful (0) or a plain SIGTERM (143), and what
keeps a script's own failure its own.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.errors import GpuLeaseError
from airflow_provider_tony.runtime.executor import (
    GPU_LEASE_EXIT_CODE,
    STDERR_TAIL_LINES,
    UserProcess,
    after_final_flush,
    gpu_lease_exit,
)
from airflow_provider_tony.runtime.messages import ExitRecord
from tests._util import wait_until

RETRYABLE = 75


@pytest.fixture(autouse=True)
def _keep_sigterm() -> Iterator[None]:
    """UserProcess forwards SIGTERM to its child by installing a handler: put pytest's back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def _start(code: str, tmp_path: Path) -> UserProcess:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return UserProcess([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, tmp_path, sock)


def test_a_clean_exit_is_0_and_a_failed_script_keeps_its_code_and_stderr(tmp_path: Path) -> None:
    assert _start("pass", tmp_path).wait() == (0, [])
    code, tail = _start("import sys; print('bad shape', file=sys.stderr); sys.exit(3)", tmp_path).wait()
    assert (code, tail) == (3, ["bad shape"])


def test_the_stderr_tail_keeps_only_the_last_lines(tmp_path: Path) -> None:
    script = f"import sys\nfor i in range({STDERR_TAIL_LINES + 5}): print(f'line {{i}}', file=sys.stderr)"
    code, tail = _start(script, tmp_path).wait()
    assert code == 0 and len(tail) == STDERR_TAIL_LINES
    assert tail[-1] == f"line {STDERR_TAIL_LINES + 4}" and tail[0] == "line 5"


def test_a_script_killed_by_a_signal_reports_it_the_way_a_shell_does(tmp_path: Path) -> None:
    user = _start("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", tmp_path)
    assert user.wait()[0] == 128 + signal.SIGKILL


def test_stopped_for_a_reason_of_ours_while_running_is_retryable_not_sigterm(tmp_path: Path) -> None:
    """The checkpoints could not be saved: the script is stopped (SIGTERM, 143); the task must
    say 75 (retryable) and why, or Airflow sees a plain kill."""
    user = _start("import signal; print('ready', flush=True); signal.pause()", tmp_path)  # runs until stopped
    user.fail("checkpoints could not be uploaded for 300s")
    code, tail = user.wait()
    assert code == RETRYABLE
    assert tail[-1] == "checkpoints could not be uploaded for 300s"


def test_a_script_that_exits_0_while_our_failure_is_pending_is_retryable_not_successful(tmp_path: Path) -> None:
    """The script finished by itself, but its checkpoint upload had already failed: not a success."""
    user = _start("pass", tmp_path)
    assert user.proc is not None
    user.proc.wait()  # it has ended before the failure is reported
    user.fail("the last checkpoint upload failed")
    assert user.wait() == (RETRYABLE, ["the last checkpoint upload failed"])


def test_our_failure_does_not_hide_the_scripts_own_exit_code(tmp_path: Path) -> None:
    user = _start("import sys; sys.exit(4)", tmp_path)
    assert user.proc is not None
    user.proc.wait()
    user.fail("the last checkpoint upload failed")
    code, tail = user.wait()
    assert code == 4 and tail == ["the last checkpoint upload failed"]


def test_a_command_that_cannot_start_is_127_with_the_reason(tmp_path: Path) -> None:
    sock = socket.socket()
    user = UserProcess([str(tmp_path / "missing")], {}, tmp_path, sock)
    code, tail = user.wait()
    assert code == 127 and len(tail) == 1 and "could not start" in tail[0] and "missing" in tail[0]


@pytest.mark.parametrize(
    ("flushed", "code", "expected"),
    [
        (True, 0, 0),  # uploaded: the success stands
        (False, 0, RETRYABLE),  # the script succeeded but its last checkpoint is not on HDFS
        (False, 3, 3),  # a failed script keeps its own code
        (True, 3, 3),
        (False, 143, 143),
    ],
)
def test_a_failed_final_flush_turns_a_success_into_75(flushed: bool, code: int, expected: int) -> None:
    new_code, tail = after_final_flush(flushed, code, ["last line"], "/ckpt/job", "HdfsError: NameNode down")
    assert new_code == expected
    if expected == RETRYABLE:
        assert tail == ["last line", "the last checkpoint could not be uploaded to /ckpt/job: HdfsError: NameNode down"]
    else:
        assert tail == ["last line"]


def test_the_gpu_lease_exit_record_is_retryable_names_its_gang_and_says_gpu() -> None:
    record = ExitRecord.from_json(gpu_lease_exit(GpuLeaseError("GPUs 0, 1 taken"), generation=2, now=5.5).to_json())
    assert record.exit_code == GPU_LEASE_EXIT_CODE == RETRYABLE
    assert record.generation == 2 and record.time == 5.5
    assert record.stderr_tail == ["GPU lease: GPUs 0, 1 taken"]


def test_the_gpu_lease_exit_record_is_stamped_now_by_default() -> None:
    import time

    before = time.time()
    record = gpu_lease_exit(GpuLeaseError("taken"), generation=0)
    assert record.time is not None and before <= record.time <= time.time()


def test_a_drain_stops_the_script_with_sigterm_and_kills_one_that_ignores_it(tmp_path: Path) -> None:
    """Before the uploader's last flush, the training process is stopped: nothing is saved after it."""
    polite = _start("import signal; print('ready', flush=True); signal.pause()", tmp_path)
    polite.stop(timeout=30.0)
    assert polite.wait()[0] == 128 + signal.SIGTERM
    ready = tmp_path / "ready"
    stubborn = _start(
        "import pathlib, signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(ready)!r}).touch(); signal.pause()",
        tmp_path,
    )
    wait_until(ready.exists, 30, "the script to ignore SIGTERM")
    stubborn.stop(timeout=0.5)
    assert stubborn.wait()[0] == 128 + signal.SIGKILL
    stubborn.stop(timeout=0.5)  # already ended: nothing to do


def test_tensorflow_cluster_roles_and_torch_ranks_share_their_reserved_port() -> None:
    from airflow_provider_tony.runtime.frameworks import holds_port

    assert holds_port("tensorflow", "worker") and holds_port("tensorflow", "chief") and holds_port("tensorflow", "ps")
    # torch's c10d store (on rank 0's port) binds with SO_REUSEADDR beside the held reservation.
    assert holds_port("pytorch", "worker") and holds_port("pytorch", "chief")
    # TensorBoard's guard and roles outside TF's cluster or torch's ranks may bind plainly.
    assert not holds_port("tensorflow", "tensorboard") and not holds_port("tensorflow", "evaluator")
    assert not holds_port("pytorch", "tensorboard") and not holds_port("pytorch", "evaluator")


@pytest.mark.parametrize(
    "option",
    ["SO_REUSEPORT", "SO_REUSEADDR"],  # TensorFlow's gRPC server; torch's c10d store (TCPStore, libuv or not)
)
def test_a_held_port_is_shared_with_the_users_server_and_closed_to_others_until_the_exit(
    tmp_path: Path, option: str
) -> None:
    """The port stays reserved while the script starts (a framework import takes seconds): its own
    server binds it, with SO_REUSEPORT as TensorFlow's gRPC server does or SO_REUSEADDR as torch's
    store does, and listens there; no other socket can take it meanwhile."""
    from airflow_provider_tony.runtime.executor import reserve_port

    sock = reserve_port()
    port = sock.getsockname()[1]
    go = tmp_path / "go"
    server = (
        "import os, socket, sys, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"  # the script's import time
        f"s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.{option}, 1)\n"
        f"s.bind(('', {port})); s.listen(); print('bound', file=sys.stderr, flush=True)\n"
    )
    user = UserProcess([sys.executable, "-c", server], {"PATH": "/usr/bin:/bin"}, tmp_path, sock, hold_port=True)
    outsider = socket.socket()
    with pytest.raises(OSError):
        outsider.bind(("", port))  # the executor's reservation is still there while the script starts
    go.touch()
    assert user.wait() == (0, ["bound"])
    outsider.bind(("", port))  # released at the exit
    outsider.close()


def test_a_port_not_held_is_free_when_the_script_starts(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime.executor import reserve_port

    sock = reserve_port()
    port = sock.getsockname()[1]
    server = f"import socket; s = socket.socket(); s.bind(('', {port}))\n"
    assert UserProcess([sys.executable, "-c", server], {"PATH": "/usr/bin:/bin"}, tmp_path, sock).wait() == (0, [])


# --------------------------------------------------------------------------- #
# Several processes per container (nproc_per_node): torchrun's semantics
# --------------------------------------------------------------------------- #
def _group(code: str, tmp_path: Path, n: int, **kw: object) -> UserProcess:
    """``n`` real processes of the same script, each with its own LOCAL_RANK, as the executor starts them."""
    envs = [{"PATH": "/usr/bin:/bin", "LOCAL_RANK": str(k)} for k in range(n)]
    return UserProcess([sys.executable, "-c", code], envs, tmp_path, socket.socket(), **kw)  # type: ignore[arg-type]


def _wait_within(user: UserProcess, seconds: float) -> tuple[int, list[str]]:
    """``user.wait()``, failing the test instead of hanging when the group is not stopped."""
    out: list[tuple[int, list[str]]] = []
    waiter = threading.Thread(target=lambda: out.append(user.wait()), daemon=True)
    waiter.start()
    waiter.join(seconds)
    assert out, f"the group did not end within {seconds} s"
    return out[0]


# Each process says it is up, then local rank 1 fails (or not); the others wait to be stopped.
PEERS = (
    "import os, pathlib, signal, sys, time\n"
    "rank = os.environ['LOCAL_RANK']\n"
    "print(f'rank {rank} up', file=sys.stderr, flush=True)\n"
    "pathlib.Path(f'up-{rank}').touch()\n"
    "if rank == '1':\n"
    "    while not all(pathlib.Path(f'up-{k}').exists() for k in range(3)): time.sleep(0.01)\n"
    "    print('bad shape on rank 1', file=sys.stderr, flush=True); sys.exit(3)\n"
    "signal.pause()\n"
)


def test_every_process_of_the_group_exits_0_so_the_container_does(tmp_path: Path) -> None:
    script = (
        "import os, pathlib, sys; r = os.environ['LOCAL_RANK']\n"
        "pathlib.Path('r' + r).touch(); print('hi ' + r, file=sys.stderr)"
    )
    user = _group(script, tmp_path, 3)
    assert len(user.pids) == 3 and len(set(user.pids)) == 3
    code, tail = _wait_within(user, 60)
    assert code == 0 and tail == ["[local_rank 0] hi 0"], "local rank 0's tail, labelled"
    assert sorted(p.name for p in tmp_path.glob("r*")) == ["r0", "r1", "r2"], "each ran with its own LOCAL_RANK"


def test_one_failed_process_stops_the_others_and_its_code_and_tail_are_the_containers(tmp_path: Path) -> None:
    user = _group(PEERS, tmp_path, 3)
    code, tail = _wait_within(user, 60)
    assert code == 3, "the first failure's own code, not the peers' SIGTERM"
    assert tail == ["[local_rank 1] rank 1 up", "[local_rank 1] bad shape on rank 1"]
    assert user.first_failure == 1
    assert [m.code() for m in user.members] == [128 + signal.SIGTERM, 3, 128 + signal.SIGTERM], "peers stopped"


def test_a_peer_that_ignores_sigterm_is_killed_after_the_stop_timeout(tmp_path: Path) -> None:
    script = (
        "import os, pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "rank = os.environ['LOCAL_RANK']; pathlib.Path('up-' + rank).touch()\n"
        "if rank == '1':\n"
        "    while not pathlib.Path('up-0').exists(): time.sleep(0.01)\n"
        "    sys.exit(5)\n"
        "signal.pause()\n"
    )
    user = _group(script, tmp_path, 2, stop_timeout=0.5)
    code, _ = _wait_within(user, 60)
    assert code == 5 and user.members[0].code() == 128 + signal.SIGKILL


def test_yarns_sigterm_reaches_every_process(tmp_path: Path) -> None:
    user = _group(
        "import os, pathlib, signal; pathlib.Path('up-' + os.environ['LOCAL_RANK']).touch(); signal.pause()",
        tmp_path,
        2,
    )
    wait_until(lambda: (tmp_path / "up-0").exists() and (tmp_path / "up-1").exists(), 30, "both processes up")
    os.kill(os.getpid(), signal.SIGTERM)  # the executor's handler forwards it, as YARN's stop
    code, _ = _wait_within(user, 60)
    assert code == 128 + signal.SIGTERM and [m.code() for m in user.members] == [143, 143]


@pytest.mark.parametrize(("after", "code"), [("sys.exit(1)", 143), ("os.abort()", 143), ("sys.exit(0)", 0)])
def test_a_script_that_fails_after_yarns_sigterm_reports_the_stop_not_its_own_code(
    tmp_path: Path, after: str, code: int
) -> None:
    """YARN killed the container (over its memory, say) and deleted its folder; a script that handles
    SIGTERM then fails on the missing folder, or crashes. The AM must see YARN's stop (143: held for
    YARN's word, the memory kill), not exit 1 read as a bug in the training code."""
    script = (
        "import os, pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: pathlib.Path('stopped').touch())\n"
        "pathlib.Path('up').touch()\n"
        "while not pathlib.Path('stopped').exists(): time.sleep(0.01)\n"
        "print('FileNotFoundError: progress.json.tmp', file=sys.stderr, flush=True)\n"
        f"{after}\n"
    )
    user = _start(script, tmp_path)
    wait_until((tmp_path / "up").exists, 30, "the script up")
    os.kill(os.getpid(), signal.SIGTERM)  # the executor's handler forwards it, as YARN's stop
    got, tail = _wait_within(user, 60)
    assert got == code
    if code:
        assert tail[0] == "FileNotFoundError: progress.json.tmp" and "stopped by YARN (SIGTERM)" in tail[-1]


def test_our_failure_stops_every_process_and_is_retryable(tmp_path: Path) -> None:
    user = _group(
        "import os, pathlib, signal; pathlib.Path('up-' + os.environ['LOCAL_RANK']).touch(); signal.pause()",
        tmp_path,
        2,
    )
    wait_until(lambda: (tmp_path / "up-0").exists() and (tmp_path / "up-1").exists(), 30, "both processes up")
    user.fail("checkpoints could not be uploaded for 300s")
    code, tail = _wait_within(user, 60)
    assert code == RETRYABLE and tail[-1] == "checkpoints could not be uploaded for 300s"
    assert [m.code() for m in user.members] == [143, 143]


def test_the_gpu_lease_fds_reach_every_process(tmp_path: Path) -> None:
    lease = tmp_path / "gpu-0.lock"
    fd = os.open(lease, os.O_RDWR | os.O_CREAT)
    try:
        script = f"import os, sys; os.fstat({fd}); print('holds', file=sys.stderr)"
        code, _ = _wait_within(_group(script, tmp_path, 2, keep_fds=[fd]), 60)
        assert code == 0
        code, tail = _wait_within(_group(script, tmp_path, 2), 60)
        assert code == 1 and "Bad file descriptor" in tail[-1], "without keep_fds the fd is closed"
    finally:
        os.close(fd)
