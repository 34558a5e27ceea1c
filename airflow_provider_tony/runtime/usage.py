"""What a task's training process used: peak memory, CPU and, where ``nvidia-smi`` answers, GPUs.

TonY reports per-task GPU metrics so that people can size their requests;
this does the same for memory, CPU and GPUs. The executor's ``UsageSampler``
thread looks at the training process and its children (the whole tree: a
script may fork data loaders) every ``SAMPLE_S`` seconds, from ``/proc``, and
at the GPUs the task was given through ``nvidia-smi``; the figures ride on the
heartbeat and the exit record to the AM, which shows them on the job page, in
the history and in the operator's XCom beside what the role requested, with a
note when a task used under half of it (``notes``).

The parsing and the arithmetic are pure functions of ``/proc`` text and
``nvidia-smi`` output, tested without a cluster; only ``UsageSampler`` reads
the machine. Linux only: elsewhere the sampler reports nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_tony.runtime.messages import Usage

log = logging.getLogger("tony.usage")

__all__ = [
    "SAMPLE_S",
    "GpuSample",
    "ProcSample",
    "UsageSampler",
    "UsageTracker",
    "notes",
    "parse_gpu_apps",
    "parse_gpus",
    "parse_stat",
    "parse_status_rss",
    "tree",
]

SAMPLE_S = 2.0  # seconds between samples: cheap (a few /proc reads), fine enough for a peak over a job
NVIDIA_SMI_TIMEOUT_S = 5.0
UNDER = 0.5  # a task that used under this share of a request gets a note
MIB = 1 << 20


@dataclass(frozen=True)
class ProcSample:
    """One process at one look: its parent, CPU time so far (seconds) and resident memory (bytes)."""

    pid: int
    ppid: int
    cpu_s: float
    rss: int


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one look: its index or UUID, utilisation (%) and memory in use (bytes)."""

    gpu: str
    util: float
    memory: int
    uuid: str = ""


def parse_stat(text: str, ticks_per_s: float) -> tuple[int, float] | None:
    """``(ppid, CPU seconds)`` from ``/proc/<pid>/stat``; None when it does not parse.

    The CPU time is the process's own (utime, stime) plus its reaped
    children's (cutime, cstime): summed over a live tree, a child that already
    ended still counts, once. The command name (field 2) is in parentheses and
    may hold spaces or parentheses itself: the fields after the *last* ``)``
    are counted.
    """
    _, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 15:
        return None
    try:
        ppid = int(fields[1])
        ticks = sum(int(f) for f in fields[11:15])
    except ValueError:
        return None
    return ppid, ticks / ticks_per_s


def parse_status_rss(text: str) -> int:
    """Resident memory in bytes from ``/proc/<pid>/status`` (``VmRSS: 1234 kB``); 0 for a kernel thread or a zombie."""
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return 0


def tree(root: int, procs: Iterable[ProcSample]) -> list[ProcSample]:
    """``root`` and every descendant among ``procs`` (a data loader's workers count as the script's)."""
    children: dict[int, list[ProcSample]] = {}
    by_pid: dict[int, ProcSample] = {}
    for p in procs:
        by_pid[p.pid] = p
        children.setdefault(p.ppid, []).append(p)
    if root not in by_pid:
        return []
    out, todo, seen = [], [by_pid[root]], {root}
    while todo:
        p = todo.pop()
        out.append(p)
        for c in children.get(p.pid, []):
            if c.pid not in seen:
                seen.add(c.pid)
                todo.append(c)
    return out


def parse_gpus(text: str) -> list[GpuSample]:
    """``nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used --format=csv,noheader,nounits``.

    A GPU whose figures read ``[N/A]`` (some virtual GPUs) is skipped.
    """
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            out.append(GpuSample(gpu=parts[0], uuid=parts[1], util=float(parts[2]), memory=int(float(parts[3]) * MIB)))
        except ValueError:
            continue
    return out


def parse_gpu_apps(text: str) -> dict[int, int]:
    """``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits``: pid -> bytes."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            pid, used = int(parts[0]), int(float(parts[1]) * MIB)
        except ValueError:
            continue
        out[pid] = out.get(pid, 0) + used
    return out


def mine(gpus: list[GpuSample], visible: str | None) -> list[GpuSample]:
    """The task's GPUs: those ``CUDA_VISIBLE_DEVICES`` names (indexes or UUIDs); all when it is unset."""
    if visible is None:
        return gpus
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    return [g for g in gpus if g.gpu in wanted or g.uuid in wanted]


class UsageTracker:
    """Peaks and totals over successive samples: pure, the sampler feeds it.

    CPU is the tree's CPU time, so processes that ended between two looks
    still count in ``cpu_seconds`` as far as they were seen; the CPU rate is
    the rise of that total over the wall time between two looks, in cores.
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self.usage = Usage()
        self._last: tuple[float, float] | None = None  # (wall, tree CPU seconds)
        self._gpu_util_sum = 0.0
        self._gpu_samples = 0

    def add(self, now: float, procs: list[ProcSample], gpus: list[GpuSample] | None, gpu_memory: int | None) -> Usage:
        u = self.usage
        u.samples += 1
        u.seconds = round(now - self.start, 3)
        rss = sum(p.rss for p in procs)
        cpu = sum(p.cpu_s for p in procs)
        u.peak_rss_bytes = max(u.peak_rss_bytes or 0, rss)
        u.cpu_seconds = round(max(u.cpu_seconds or 0.0, cpu), 3)
        if self._last is not None and now > self._last[0]:
            rate = max(0.0, cpu - self._last[1]) / (now - self._last[0])
            u.peak_cpu_cores = round(max(u.peak_cpu_cores or 0.0, rate), 3)
        self._last = (now, cpu)
        if u.seconds > 0 and u.cpu_seconds is not None:
            u.mean_cpu_cores = round(u.cpu_seconds / u.seconds, 3)
        if gpus:
            util = sum(g.util for g in gpus) / len(gpus)
            self._gpu_util_sum += util
            self._gpu_samples += 1
            u.peak_gpu_util = round(max(u.peak_gpu_util or 0.0, util), 1)
            u.mean_gpu_util = round(self._gpu_util_sum / self._gpu_samples, 1)
            memory = gpu_memory if gpu_memory is not None else sum(g.memory for g in gpus)
            u.peak_gpu_memory_bytes = max(u.peak_gpu_memory_bytes or 0, memory)
            u.gpus_seen = len(gpus)
        return u


def notes(usage: Usage | None, memory_mib: int, vcores: int, gpus: int) -> list[str]:
    """What a task used under half of: its memory, CPU and GPU requests, in words for people.

    Judged on the peaks (a task that once needed its memory needs it), and
    only after a few samples: a task that ended in a second says nothing.
    """
    if usage is None or usage.samples < 3:
        return []
    out = []
    requested = memory_mib * MIB
    if usage.peak_rss_bytes is not None and requested and usage.peak_rss_bytes < UNDER * requested:
        out.append(
            f"peak memory {usage.peak_rss_bytes / MIB:.0f} MiB, under half of the {memory_mib} MiB requested:"
            " a smaller request would do"
        )
    if usage.peak_cpu_cores is not None and vcores > 1 and usage.peak_cpu_cores < UNDER * vcores:
        out.append(f"peak CPU {usage.peak_cpu_cores:.2f} cores, under half of the {vcores} vcores requested")
    if gpus and usage.peak_gpu_util is not None and usage.peak_gpu_util < UNDER * 100:
        out.append(f"peak GPU utilisation {usage.peak_gpu_util:.0f}%, under half of the {gpus} GPU(s) requested")
    if gpus and usage.gpus_seen == 0 and usage.samples >= 3:
        out.append(f"{gpus} GPU(s) requested but nvidia-smi reported none for this task")
    return out


def _read_procs(proc: Path, ticks_per_s: float) -> list[ProcSample]:
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = parse_stat((entry / "stat").read_text(), ticks_per_s)
            if stat is None:
                continue
            rss = parse_status_rss((entry / "status").read_text())
        except OSError:  # it ended while we looked
            continue
        out.append(ProcSample(int(entry.name), stat[0], stat[1], rss))
    return out


def _nvidia_smi(args: list[str], smi: str) -> str | None:
    """nvidia-smi's output, or None when it fails, hangs or is gone (CalledProcessError is a SubprocessError)."""
    try:
        # Bytes, decoded leniently: text=True would raise on a stray byte and lose the whole sample.
        done = subprocess.run([smi, *args], capture_output=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace")


class UsageSampler(threading.Thread):
    """Samples the training process trees every ``interval`` seconds; ``snapshot`` is what beats carry.

    ``root_pid`` is the training process, or every one of a container that runs several
    (``nproc_per_node``): their trees are measured together, as one task's use.
    """

    def __init__(
        self,
        root_pid: int | Sequence[int],
        *,
        visible_gpus: str | None,
        want_gpus: bool,
        interval: float = SAMPLE_S,
        proc: Path = Path("/proc"),
        clock: Callable[[], float] = time.time,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(name="tony-usage", daemon=True)
        self.roots = (root_pid,) if isinstance(root_pid, int) else tuple(root_pid)
        self.visible = visible_gpus
        self.interval = interval
        self.proc = proc
        self.clock = clock
        self.tracker = UsageTracker(clock())
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        path = (env or os.environ).get("PATH")
        self.smi = shutil.which("nvidia-smi", path=path) if want_gpus else None
        try:
            self.ticks = float(os.sysconf("SC_CLK_TCK"))
        except (ValueError, OSError, AttributeError):
            self.ticks = 100.0

    def sample(self) -> None:
        if not self.proc.is_dir():
            return
        table = _read_procs(self.proc, self.ticks)
        procs = list({p.pid: p for root in self.roots for p in tree(root, table)}.values())
        if not procs:
            return
        gpus: list[GpuSample] | None = None
        gpu_memory = None
        if self.smi is not None:
            raw = _nvidia_smi(
                ["--query-gpu=index,uuid,utilization.gpu,memory.used", "--format=csv,noheader,nounits"], self.smi
            )
            gpus = mine(parse_gpus(raw), self.visible) if raw is not None else None
            apps = _nvidia_smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], self.smi)
            if apps is not None:
                pids = {p.pid for p in procs}
                by_pid = parse_gpu_apps(apps)
                if any(pid in by_pid for pid in pids):  # in a PID namespace the pids may not match: keep the GPUs' own
                    gpu_memory = sum(v for pid, v in by_pid.items() if pid in pids)
        with self.lock:
            self.tracker.add(self.clock(), procs, gpus, gpu_memory)

    def snapshot(self) -> Usage | None:
        with self.lock:
            if not self.tracker.usage.samples:
                return None
            return Usage.from_dict(self.tracker.usage.to_dict())

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - a missed sample must not touch training
                log.warning("sampling the training process's use: %s", exc)
            self.stop_event.wait(self.interval)

    def stop(self) -> Usage | None:
        """Stop sampling; the figures so far."""
        self.stop_event.set()
        return self.snapshot()
