"""TonY's own processes yield the CPU to the training they watch.

The AM container (skein's ApplicationMaster JVM with tony's AM under it) and
each task executor share their nodes with TensorFlow workers that wait for
one another at every all-reduce: when a heartbeat, a gRPC call or a JIT
compile holds a core just as a worker wakes, every worker waits. At nice 10
these processes still get about a tenth of a contended core, far more than
the few milliseconds a second they use, but a waking worker goes first.
User code keeps the priority it was started with: the executor lowers its
own threads only after the user process has been forked.

Linux keeps a nice value per thread, so every thread is changed (threads
started later inherit it from the thread that starts them). Where there is
no ``/proc`` nothing changes.
"""
from __future__ import annotations

import os
from pathlib import Path

BACKGROUND_NICE = 10


def lower(pid: int | None = None, nice: int = BACKGROUND_NICE) -> int:
    """Every thread of ``pid`` (this process by default) to at least ``nice``.

    Never raises a thread's priority; returns how many threads changed.
    """
    task_dir = Path(f"/proc/{os.getpid() if pid is None else pid}/task")
    try:
        tids = [int(t.name) for t in task_dir.iterdir()]
    except (OSError, ValueError):
        return 0
    changed = 0
    for tid in tids:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed += 1
        except OSError:  # the thread ended meanwhile, or it is not ours to change
            continue
    return changed


def is_skein_am(pid: int) -> bool:
    """Whether ``pid`` is skein's ApplicationMaster JVM (the parent of tony's AM)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0].endswith(b"java") and any(a.endswith(b"skein.ApplicationMaster") for a in argv)
