"""The resource sampler's pure parts: /proc and nvidia-smi parsing, the process tree, peaks, notes.

``UsageSampler`` is run on a planted ``/proc`` folder with a hand-driven clock
(its figures exact), and once against this very process (Linux's /proc) with a
child that allocates memory and burns CPU: that run checks only what no load on
the machine can change (the memory the test allocated, that CPU time was seen).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_tony.runtime import usage as U
from airflow_provider_tony.runtime.messages import JobHistory, StateDocument, TaskSummary, Usage
from airflow_provider_tony.runtime.page import render_page

STAT = "4242 (python3 (my) script) S 17 4242 17 0 -1 4194304 100 0 0 0 250 50 30 20 20 0 3 0 1000 0 0"


def test_stat_counts_own_and_reaped_children_cpu_after_the_last_parenthesis() -> None:
    assert U.parse_stat(STAT, 100.0) == (17, (250 + 50 + 30 + 20) / 100.0)
    assert U.parse_stat("4242 (x) S 1 2", 100.0) is None
    assert U.parse_stat("garbage", 100.0) is None
    assert U.parse_stat("1 (x) S a b c d e f g h i j k l m n", 100.0) is None


def test_rss_from_status_in_bytes() -> None:
    assert U.parse_status_rss("Name:\tpython\nVmRSS:\t  2048 kB\nThreads: 3\n") == 2048 * 1024
    assert U.parse_status_rss("Name:\tkthreadd\n") == 0


def P(pid: int, ppid: int, cpu: float = 0.0, rss: int = 0) -> U.ProcSample:
    return U.ProcSample(pid, ppid, cpu, rss)


def test_the_tree_holds_the_root_and_every_descendant_only() -> None:
    procs = [P(1, 0), P(10, 1), P(11, 10), P(12, 11), P(13, 10), P(20, 1), P(21, 20)]
    assert sorted(p.pid for p in U.tree(10, procs)) == [10, 11, 12, 13]
    assert U.tree(99, procs) == []
    assert sorted(p.pid for p in U.tree(5, [P(5, 6), P(6, 5)])) == [5, 6]  # a cycle ends


def test_nvidia_smi_gpus_and_apps() -> None:
    gpus = U.parse_gpus("0, GPU-aaa, 87, 1024\n1, GPU-bbb, [N/A], [N/A]\n2, GPU-ccc, 5, 10\nbad\n")
    assert gpus == [U.GpuSample("0", 87.0, 1024 << 20, "GPU-aaa"), U.GpuSample("2", 5.0, 10 << 20, "GPU-ccc")]
    assert U.mine(gpus, "2") == gpus[1:] and U.mine(gpus, "GPU-aaa") == gpus[:1]
    assert U.mine(gpus, "") == [] and U.mine(gpus, None) == gpus
    assert U.parse_gpu_apps("100, 300\n100, 200\n7, [N/A]\n") == {100: 500 << 20}


def test_the_tracker_keeps_peaks_and_rates() -> None:
    t = U.UsageTracker(start=100.0)
    t.add(101.0, [P(1, 0, cpu=1.0, rss=100), P(2, 1, cpu=0.0, rss=50)], None, None)
    t.add(103.0, [P(1, 0, cpu=4.0, rss=400)], [U.GpuSample("0", 80.0, 5 << 20)], None)  # 3 CPU-s in 2 s
    u = t.add(105.0, [P(1, 0, cpu=5.0, rss=200)], [U.GpuSample("0", 20.0, 9 << 20)], 7 << 20)
    assert (u.samples, u.seconds, u.peak_rss_bytes, u.cpu_seconds) == (3, 5.0, 400, 5.0)
    assert u.peak_cpu_cores == 1.5 and u.mean_cpu_cores == 1.0
    assert (u.peak_gpu_util, u.mean_gpu_util, u.peak_gpu_memory_bytes, u.gpus_seen) == (80.0, 50.0, 7 << 20, 1)


def _used(**kw: object) -> Usage:
    return Usage(samples=5, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("used", "request_", "expected"),
    [
        (_used(peak_rss_bytes=300 << 20), (1024, 1, 0), ["peak memory 300 MiB, under half of the 1024 MiB requested"]),
        (_used(peak_rss_bytes=600 << 20), (1024, 1, 0), []),
        (_used(peak_rss_bytes=600 << 20, peak_cpu_cores=0.9), (1024, 4, 0), ["peak CPU 0.90 cores, under half of"]),
        (_used(peak_rss_bytes=600 << 20, peak_cpu_cores=3.0), (1024, 4, 0), []),
        (_used(peak_rss_bytes=600 << 20, peak_gpu_util=30.0, gpus_seen=1), (1024, 1, 1), ["peak GPU utilisation 30%"]),
        (_used(peak_rss_bytes=600 << 20, gpus_seen=0), (1024, 1, 2), ["2 GPU(s) requested but nvidia-smi reported"]),
        (Usage(samples=2, peak_rss_bytes=1), (1024, 1, 0), []),  # too few samples to judge
        (None, (1024, 1, 0), []),
    ],
)
def test_a_note_for_each_request_used_under_half(used: Usage | None, request_: tuple, expected: list[str]) -> None:
    got = U.notes(used, *request_)
    assert len(got) == len(expected) and all(g.startswith(e) for g, e in zip(got, expected, strict=True)), got


def plant_proc(proc: Path, pid: int, ppid: int, ticks: int, rss_kib: int) -> None:
    """``/proc/<pid>/stat`` (utime ``ticks``, nothing else) and ``status`` (``VmRSS``) as Linux writes them."""
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "0", "0", "0"] + ["0"] * 6
    (proc / str(pid) / "stat").write_text(f"{pid} (py (x)) {' '.join(fields)}\n")
    (proc / str(pid) / "status").write_text(f"Name:\tpy\nVmRSS:\t{rss_kib} kB\n")


def test_the_sampler_reads_the_tree_from_proc_and_rates_its_cpu(tmp_path: Path) -> None:
    """Two looks 2 s apart: the tree's CPU rose by 3 s (root 1 s, child 2 s), so 1.5 cores; others never count."""
    proc, now = tmp_path / "proc", [1000.0]
    (proc / "self").mkdir(parents=True)  # not a pid: skipped
    plant_proc(proc, 1, 0, ticks=0, rss_kib=1)
    plant_proc(proc, 50, 1, ticks=100, rss_kib=10_240)  # the root
    plant_proc(proc, 51, 50, ticks=100, rss_kib=20_480)  # its child
    plant_proc(proc, 60, 1, ticks=900, rss_kib=99_999)  # not in the tree
    sampler = U.UsageSampler(50, visible_gpus=None, want_gpus=False, proc=proc, clock=lambda: now[0])
    sampler.ticks = 100.0
    sampler.sample()
    first = sampler.snapshot()
    assert first is not None and first.samples == 1 and first.peak_cpu_cores is None, "one look gives no rate"
    assert first.peak_rss_bytes == 30 << 20 and first.cpu_seconds == 2.0
    now[0] += 2.0
    plant_proc(proc, 50, 1, ticks=200, rss_kib=10_240)
    plant_proc(proc, 51, 50, ticks=300, rss_kib=5_120)
    plant_proc(proc, 60, 1, ticks=5000, rss_kib=99_999)
    sampler.sample()
    u = sampler.stop()
    assert u is not None and u.samples == 2 and u.seconds == 2.0
    assert u.cpu_seconds == 5.0 and u.peak_cpu_cores == 1.5 and u.mean_cpu_cores == 2.5
    assert u.peak_rss_bytes == 30 << 20, "the peak, not the last look"
    assert u.peak_gpu_util is None


def test_the_sampler_sees_a_real_process_tree() -> None:
    if sys.platform != "linux":
        pytest.skip("/proc is Linux's")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "block = bytearray(200 << 20)\n"  # 200 MiB in the root
            # the child holds 100 MiB until the test kills the group (it waits for a signal, no timer)
            "kid = subprocess.Popen([sys.executable, '-c',"
            " 'b = bytearray(100 << 20); import signal; signal.pause()'])\n"
            "end = time.time() + 30\n"
            "while time.time() < end: sum(range(10000))\n",
        ],
        start_new_session=True,  # its own process group: the test ends the pair by that id
    )
    try:
        sampler = U.UsageSampler(child.pid, visible_gpus=None, want_gpus=False, interval=0.2)
        sampler.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            u = sampler.snapshot()
            if u and u.samples >= 3 and (u.peak_rss_bytes or 0) > 300 << 20:
                break
            time.sleep(0.1)
        u = sampler.stop()
        assert u is not None and u.samples >= 3
        assert (u.peak_rss_bytes or 0) > 300 << 20, "the child's 100 MiB counts with the root's 200 MiB"
        # How fast the child burns CPU depends on the machine's load; that CPU time was seen does not.
        assert (u.cpu_seconds or 0) > 0 and u.peak_cpu_cores is not None, u
        assert u.peak_gpu_util is None, "no nvidia-smi asked for"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_the_page_shows_use_beside_request_and_the_note() -> None:
    used = Usage(
        samples=4,
        peak_rss_bytes=100 << 20,
        peak_cpu_cores=0.5,
        requested_memory_mib=1024,
        requested_vcores=1,
        notes=["peak memory 100 MiB, under half of the 1024 MiB requested"],
    )
    doc = StateDocument(tasks={"worker:0": TaskSummary(state="RUNNING", role="worker", usage=used)})
    page = render_page(JobHistory(state=doc))
    assert "memory 100 of 1024 MiB" in page and "CPU 0.50 of 1 cores" in page
    assert 'class="note">peak memory 100 MiB, under half' in page
