"""What YARN says about a container that ended: was it preempted, or killed for its memory?

skein's Java AM reports a container that ended with a negative YARN exit
status (``ContainerExitStatus``) as FAILED and passes YARN's diagnostics on as
the container's ``exit_message`` (skein keeps no exit status): the one fact the
AM can read through skein, so its texts are recognised here, in one place.

- A container the scheduler took back for a higher-priority queue ends with
  status -102 (PREEMPTED), whose diagnostics are always Hadoop's
  ``SchedulerUtils.PREEMPTED_CONTAINER`` text. It is the cluster's decision,
  not a fault of the job: the AM restarts the gang without counting it against
  ``max_restarts`` (``runtime/state.py``).
- A container whose process tree's resident memory went over its request is
  killed by the NodeManager's ``ContainersMonitorImpl`` with status -104
  (KILLED_EXCEEDED_PMEM; -103 for virtual memory). Its diagnostics say how much
  it used of how much: ``Container [pid=..,containerID=..] is running 493051904B
  beyond the 'PHYSICAL' memory limit. Current usage: 982.2 MB of 512 MB physical
  memory used; 1.6 GB of 1.0 GB virtual memory used. Killing container.``
  (Hadoop 3; Hadoop 2 wrote ``is running beyond physical memory limits``);
  skein passes on only the ``982.2 MB of 512 MB physical memory used`` part. The
  executor inside sees only the SIGTERM (exit 143), which would read as a
  retryable signal death; the same request would be killed again, so the AM
  fails the job as ``out_of_memory`` instead, naming the field to raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: YARN's ``ContainerExitStatus.PREEMPTED``.
PREEMPTED_EXIT_STATUS = -102
#: The diagnostics the ResourceManager gives a preempted container.
PREEMPTED_DIAGNOSTICS = "Container preempted by scheduler"
#: YARN's ``ContainerExitStatus.KILLED_EXCEEDED_PMEM`` and ``KILLED_EXCEEDED_VMEM``.
KILLED_EXCEEDED_PMEM = -104
KILLED_EXCEEDED_VMEM = -103

_BEYOND = re.compile(
    r"running (?:\d+B )?beyond "
    r"(?:the '?(?P<type3>physical|virtual)'? memory limit|(?P<type2>physical|virtual) memory limits)",
    re.IGNORECASE,
)
#: Hadoop's ``TraditionalBinaryPrefix.long2String``: one decimal, binary multiples (its "MB" is MiB).
_SIZE = r"(\d+(?:\.\d+)?)\s*([kmgtpe]?)b"
_USAGE = {
    kind: re.compile(rf"{_SIZE} of {_SIZE} {kind} memory used", re.IGNORECASE) for kind in ("physical", "virtual")
}
_MULTIPLIER = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}
_MIB = 2**20
#: skein's exit message for a memory kill whose diagnostics held no figures it could read.
SKEIN_MEMORY_DIAGNOSTICS = "Container killed by YARN for exceeding memory limits"


@dataclass(frozen=True)
class MemoryKill:
    """YARN's account of a container killed for its memory: what it used, of what limit, which memory."""

    memory: str  # "physical" (RSS over the request) or "virtual" (vmem-pmem-ratio times it)
    used_bytes: int | None  # the process tree's usage when the monitor killed it: its peak, as YARN saw it
    limit_bytes: int | None  # the container's limit (the request as YARN allocated it)

    @property
    def used_mib(self) -> int | None:
        return None if self.used_bytes is None else round(self.used_bytes / _MIB)

    @property
    def limit_mib(self) -> int | None:
        return None if self.limit_bytes is None else round(self.limit_bytes / _MIB)

    @property
    def exit_status(self) -> int:
        return KILLED_EXCEEDED_PMEM if self.memory == "physical" else KILLED_EXCEEDED_VMEM


def is_preempted(message: str | None) -> bool:
    """Whether a container's YARN diagnostics say the scheduler preempted it.

    The text may be embedded in a longer message (the AM prefixes the
    container id and state), so it is looked for, case-insensitively, not
    compared whole.
    """
    return bool(message) and PREEMPTED_DIAGNOSTICS.lower() in str(message).lower()


def _bytes(number: str, prefix: str) -> int:
    return round(float(number) * _MULTIPLIER[prefix.lower()])


def memory_kill(message: str | None) -> MemoryKill | None:
    """YARN's memory kill in a container's diagnostics, or None when they tell of none.

    Two wordings reach the AM: the NodeManager's whole diagnostics (``is
    running ..B beyond the 'PHYSICAL' memory limit. Current usage: ..``, as the
    ResourceManager's REST API serves them), and skein's shortening of them
    for a -104/-103 exit (its ``Utils.formatExceededMemMessage``: only ``982.0 MB
    of 512 MB physical memory used``, or ``Container killed by YARN for
    exceeding memory limits`` when its pattern found no figures). A kill
    recognised without figures still names the memory type.
    """
    if not message:
        return None
    text = str(message)
    beyond = _BEYOND.search(text)
    if beyond is not None:
        memory = (beyond.group("type3") or beyond.group("type2")).lower()
        kinds: tuple[str, ...] = (memory,)
    else:
        kinds = ("physical", "virtual")
    for kind in kinds:
        usage = _USAGE[kind].search(text)
        if usage is not None:
            return MemoryKill(kind, _bytes(usage.group(1), usage.group(2)), _bytes(usage.group(3), usage.group(4)))
    if beyond is not None:
        return MemoryKill(kinds[0], None, None)
    if SKEIN_MEMORY_DIAGNOSTICS.lower() in text.lower():
        return MemoryKill("physical", None, None)
    return None
