"""CPU and memory of a process together with its descendants, from /proc.

The tracking benchmark needs this because the Python side of tracking is
only half of it: each skein client runs a Java driver as a child process,
and its CPU and memory belong to the cost of following a job.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one live process."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK


def tree(pid: int) -> list[int]:
    """``pid`` and every live descendant."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def usage(pid: int) -> dict[str, float]:
    """CPU seconds and resident MiB of ``pid``'s tree, and how many of its processes run Java."""
    cpu = rss = 0.0
    jvms = 0
    for member in tree(pid):
        try:
            cpu += cpu_seconds(member)
            rss += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * _PAGE / 2**20
            jvms += b"java" in Path(f"/proc/{member}/cmdline").read_bytes().split(b"\0")[0]
        except (OSError, IndexError, ValueError):
            continue
    return {"cpu": cpu, "rss_mib": rss, "jvms": jvms}
