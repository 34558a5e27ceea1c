"""TonY's own processes yield the CPU to the training they watch.

The AM container (skein's ApplicationMaster JVM with tony's AM under it) and
each task executor share their nodes with TensorFlow workers that wait for
one another at every all-reduce: when a heartbeat, a gRPC call or a JIT
compile takes a core from a running worker, every worker waits. So each of
their threads gets two things:

* nice 10: when cores are contended they get about a tenth of one, far more
  than the few milliseconds a second they use, and a worker goes first;
* the SCHED_BATCH policy: a thread of this class never preempts a running
  thread when it wakes up; it runs on an idle core (workers leave plenty idle
  while they wait for each other) or at the next scheduler tick. Unlike
  SCHED_IDLE it keeps its fair share, so a node busy with other jobs cannot
  starve the heartbeats.

Both are open to unprivileged users and are inherited by threads started
later. Neither reaches past the container's own session, though: with the
kernel's autogroup scheduling (on by default in most distributions) each
session is one scheduling entity with the weight of a nice-0 task, and YARN
starts every container in a session of its own, so a container full of nice
10 threads still competes with a TensorFlow worker's container as an equal.
The AM container holds nothing but TonY, so the AM also moves its whole
session to nice 10 (``lower_session``).

User code keeps the priority it was started with: the executor lowers its
own threads only after the user process has been forked. Linux keeps nice
and policy per thread, so every thread is changed. Where there is no
``/proc`` (or no SCHED_BATCH) nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path

BACKGROUND_NICE = 10


def lower(pid: int | None = None, nice: int = BACKGROUND_NICE) -> int:
    """Every thread of ``pid`` (this process by default) to at least ``nice``, and
    from the default policy to SCHED_BATCH.

    Never raises a thread's priority and leaves other policies (SCHED_IDLE,
    real-time) alone; returns how many threads changed.
    """
    task_dir = Path(f"/proc/{os.getpid() if pid is None else pid}/task")
    try:
        tids = [int(t.name) for t in task_dir.iterdir()]
    except (OSError, ValueError):
        return 0
    batch = getattr(os, "SCHED_BATCH", None)
    changed = 0
    for tid in tids:
        try:
            moved = False
            if batch is not None and os.sched_getscheduler(tid) == os.SCHED_OTHER:
                os.sched_setscheduler(tid, batch, os.sched_param(0))  # keeps the nice value
                moved = True
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                moved = True
            changed += moved
        except OSError:  # the thread ended meanwhile, or it is not ours to change
            continue
    return changed


def lower_session(nice: int = BACKGROUND_NICE, *, max_depth: int = 2) -> bool:
    """The autogroup of this process's session to at least ``nice``.

    Only where the session is the container's own: its leader is this process
    or one of its ``max_depth`` nearest ancestors (the AM's chain is the
    container's launch shell, skein's JVM, this process). A session shared
    with anything else (a NodeManager that does not start containers in new
    sessions, a shell) is left alone, as is a kernel without autogroups.
    Returns whether anything changed.
    """
    chain = [os.getpid()]
    for _ in range(max_depth):
        chain.append(_parent(chain[-1]))
    if os.getsid(0) not in chain:
        return False
    group = Path("/proc/self/autogroup")
    try:
        current = int(group.read_text().split("nice")[1])
        if current >= nice:
            return False
        group.write_text(str(nice))
    except (OSError, ValueError, IndexError):  # no autogroups, or not ours to change
        return False
    return True


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
    except (OSError, ValueError, IndexError):
        return -1


def is_skein_am(pid: int) -> bool:
    """Whether ``pid`` is skein's ApplicationMaster JVM (the parent of tony's AM)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[0].endswith(b"java") and any(a.endswith(b"skein.ApplicationMaster") for a in argv)
