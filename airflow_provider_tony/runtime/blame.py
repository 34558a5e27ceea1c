"""Which peer a failed task's TensorFlow errors blame, so a lost task is declared from the evidence.

Under ``MultiWorkerMirroredStrategy`` the survivors of a lost worker fail
within a couple of seconds, their stderr naming the peer their collective or
RPC could not reach (``/job:worker/replica:0/task:2``, or its ``host:port``),
while the heartbeat timeout that declares the lost task must stay long enough
not to name a merely slow task lost under load. The two together are
conclusive sooner than either alone: a task that survivors blame *and* that
has missed ``BLAMED_MISSED_BEATS`` beats is lost (``runtime/failure_policy.py``'s
``FailurePolicy``). Missed beats without blame are only slowness; blame without
missed beats is a peer that still answers the AM (the fault was elsewhere).

Pure: the text of stderr tails and the tasks' addresses in, task ids out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["BLAMED_MIN_SILENCE_S", "BLAMED_MISSED_BEATS", "blamed"]

#: Beats a blamed task must have missed before it is declared lost: more than one late beat (a GC pause,
#: a loaded node), far fewer than a heartbeat timeout.
BLAMED_MISSED_BEATS = 3

#: The least silence that declares a blamed task lost, whatever the heartbeat interval: the time
#: YARN takes to tell the AM that a container ended (the NodeManager's heartbeat, skein's AM asking
#: the ResourceManager each second, the AM's next look). A container YARN killed for its memory
#: dies silent (SIGKILL 250 ms after SIGTERM), its peers blame it at once, and it must be named for
#: what YARN says, not declared lost (and restarted) before YARN has said it.
BLAMED_MIN_SILENCE_S = 3.0

_TF_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def blamed(tails: Iterable[Iterable[str]], addresses: Mapping[str, tuple[str, int | None]]) -> set[str]:
    """The task ids that any of ``tails`` names: by TensorFlow's task name or by ``host:port``.

    ``addresses`` maps each task id (``worker:2``) to its registered host and
    port. A task's own name in its own tail (TensorFlow prefixes some errors
    with the local task) is the caller's to leave out: it passes only the
    tails of other tasks.
    """
    text = "\n".join(line for tail in tails for line in tail)
    found = {f"{role}:{index}" for role, index in _TF_TASK.findall(text)}
    for task_id, (host, port) in addresses.items():
        if port is not None and re.search(rf"(?<![\w.]){re.escape(host)}:{port}(?!\d)", text):
            found.add(task_id)
    return found & set(addresses)
