"""The resource sampler's pure parts: /proc and nvidia-smi parsing, the process tree, peaks, notes.

``UsageSampler`` is run on a planted ``/proc`` folder with a hand-driven clock
(its figures exact), and once against this very process (Linux's /proc) with a
child that allocates memory and burns CPU: that run checks only what no load on
the machine can change (the memory the test allocated, that CPU time was seen).
"""

from __future__ import annotations

import logging
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
    # exactly the 15 fields it reads (through cstime) is enough: an old kernel's shorter line still counts
    assert U.parse_stat("1 (x) S 7 0 0 0 0 0 0 0 0 0 100 200 300 400", 100.0) == (7, 10.0)


def test_rss_from_status_in_bytes() -> None:
    assert U.parse_status_rss("Name:\tpython\nVmRSS:\t  2048 kB\nThreads: 3\n") == 2048 * 1024
    assert U.parse_status_rss("Name:\tkthreadd\n") == 0
    assert U.parse_status_rss("VmRSS:\n") == 0, "a line without a figure is no figure, not an error"
    assert U.parse_status_rss("VmRSS:\t2048\n") == 2048 * 1024, "the figure, whether or not the unit follows"


def P(pid: int, ppid: int, cpu: float = 0.0, rss: int = 0) -> U.ProcSample:
    return U.ProcSample(pid, ppid, cpu, rss)


def test_the_tree_holds_the_root_and_every_descendant_only() -> None:
    procs = [P(1, 0), P(10, 1), P(11, 10), P(12, 11), P(13, 10), P(20, 1), P(21, 20)]
    assert sorted(p.pid for p in U.tree(10, procs)) == [10, 11, 12, 13]
    assert U.tree(99, procs) == []
    assert sorted(p.pid for p in U.tree(5, [P(5, 6), P(6, 5)])) == [5, 6]  # a cycle ends


def test_nvidia_smi_gpus_and_apps() -> None:
    # a line that does not parse (a warning, a virtual GPU's [N/A]) is skipped wherever it is: the rest still count
    gpus = U.parse_gpus("bad\n0, GPU-aaa, 87, 1024\n1, GPU-bbb, [N/A], [N/A]\n2, GPU-ccc, 5, 10\nbad\n")
    assert gpus == [U.GpuSample("0", 87.0, 1024 << 20, "GPU-aaa"), U.GpuSample("2", 5.0, 10 << 20, "GPU-ccc")]
    assert U.mine(gpus, "2") == gpus[1:] and U.mine(gpus, "GPU-aaa") == gpus[:1]
    assert U.mine(gpus, "0, 2") == gpus, "CUDA_VISIBLE_DEVICES lists several, comma-separated"
    assert U.mine(gpus, "") == [] and U.mine(gpus, None) == gpus
    assert U.parse_gpu_apps("bad\n7, [N/A]\n100, 300\n100, 200\n") == {100: 500 << 20}


def test_the_tracker_keeps_peaks_and_rates() -> None:
    t = U.UsageTracker(start=100.0)
    t.add(101.0, [P(1, 0, cpu=1.0, rss=100), P(2, 1, cpu=0.0, rss=50)], None, None)
    t.add(103.0, [P(1, 0, cpu=4.0, rss=400)], [U.GpuSample("0", 80.0, 5 << 20)], None)  # 3 CPU-s in 2 s
    u = t.add(105.0, [P(1, 0, cpu=5.0, rss=200)], [U.GpuSample("0", 20.0, 9 << 20)], 7 << 20)
    assert (u.samples, u.seconds, u.peak_rss_bytes, u.cpu_seconds) == (3, 5.0, 400, 5.0)
    assert u.peak_cpu_cores == 1.5 and u.mean_cpu_cores == 1.0
    assert (u.peak_gpu_util, u.mean_gpu_util, u.peak_gpu_memory_bytes, u.gpus_seen) == (80.0, 50.0, 7 << 20, 1)


def test_the_first_look_is_taken_as_seen_even_at_zero() -> None:
    """A zombie's 0 bytes, an idle GPU's 0% and 0 bytes are figures, not missing ones: no floor creeps in."""
    u = U.UsageTracker(start=0.0).add(0.5, [P(1, 0, cpu=0.12345, rss=0)], [U.GpuSample("0", 0.0, 0)], None)
    assert (u.seconds, u.cpu_seconds, u.peak_rss_bytes) == (0.5, 0.123, 0)
    assert u.mean_cpu_cores == 0.246, "half a second in: the mean is there already"
    assert (u.peak_gpu_util, u.mean_gpu_util, u.peak_gpu_memory_bytes, u.gpus_seen) == (0.0, 0.0, 0, 1)


def test_the_cpu_rate_is_the_rise_over_the_wall_time_between_looks() -> None:
    """0.5 CPU-s in 3 s is 0.167 cores (a clock that reads less than the CPU seconds is still a clock)."""
    t = U.UsageTracker(start=0.0)
    t.add(1.0, [P(1, 0, cpu=5.0)], None, None)
    assert t.add(4.0, [P(1, 0, cpu=5.5)], None, None).peak_cpu_cores == 0.167
    same = U.UsageTracker(start=0.0)
    same.add(1.0, [P(1, 0, cpu=1.0)], None, None)
    assert same.add(1.0, [P(1, 0, cpu=2.0)], None, None).peak_cpu_cores is None, "no time passed: no rate, no error"


def test_the_tracker_rounds_to_what_the_page_shows() -> None:
    """Seconds and cores to the millisecond / thousandth, GPU utilisation to a tenth, averaged over the GPUs."""
    t = U.UsageTracker(start=0.0)
    u = t.add(1.23456, [P(1, 0, cpu=1.0)], [U.GpuSample("0", 45.0, 1), U.GpuSample("1", 50.5, 1)], None)
    assert (u.seconds, u.mean_cpu_cores, u.peak_gpu_util, u.mean_gpu_util) == (1.235, 0.81, 47.8, 47.8)
    u = t.add(2.0, [P(1, 0, cpu=1.0)], [U.GpuSample("0", 10.0, 1), U.GpuSample("1", 10.0, 1)], None)
    assert (u.peak_gpu_util, u.mean_gpu_util) == (47.8, 28.9)


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
        # "under half" is strict: exactly half gets no note
        (_used(peak_rss_bytes=512 << 20), (1024, 1, 0), []),
        (_used(peak_rss_bytes=600 << 20, peak_cpu_cores=2.0), (1024, 4, 0), []),
        (_used(peak_rss_bytes=600 << 20, peak_gpu_util=50.0, gpus_seen=1), (1024, 1, 1), []),
        (_used(peak_rss_bytes=600 << 20, peak_gpu_util=50.2, gpus_seen=1), (1024, 1, 1), []),
        # one vcore is the least a task can ask for: no note however idle; two can be one too many
        (_used(peak_rss_bytes=600 << 20, peak_cpu_cores=0.1), (1024, 1, 0), []),
        (_used(peak_rss_bytes=600 << 20, peak_cpu_cores=0.9), (1024, 2, 0), ["peak CPU 0.90 cores, under half of"]),
        # three samples are enough to say nvidia-smi saw none of the GPUs asked for
        (Usage(samples=3, peak_rss_bytes=600 << 20, gpus_seen=0), (1024, 1, 1), ["1 GPU(s) requested but nvidia"]),
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


def test_a_pid_that_cannot_be_read_is_skipped_not_the_rest(tmp_path: Path) -> None:
    """A process that ended while /proc was read (no status), or a stat that does not parse, costs that pid only."""
    proc = tmp_path / "proc"
    for pid in (101, 102, 103, 104):
        plant_proc(proc, pid, 1, ticks=100, rss_kib=1)
    first, second = list(proc.iterdir())[:2]  # the order _read_procs meets them in: the bad ones come first
    (first / "status").unlink()
    (second / "stat").write_text("garbage")
    got = sorted(p.pid for p in U._read_procs(proc, 100.0))
    assert got == sorted({101, 102, 103, 104} - {int(first.name), int(second.name)})


def plant_smi(bin_dir: Path, gpus: bytes, apps: bytes, *, fail: bool = False, delay: float = 0.0) -> None:
    """A fake ``nvidia-smi`` that answers the two queries the sampler asks, with exactly its arguments (else exit 2)."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gpus.csv").write_bytes(gpus)
    (bin_dir / "apps.csv").write_bytes(apps)
    q_gpu = "--query-gpu=index,uuid,utilization.gpu,memory.used --format=csv,noheader,nounits"
    q_apps = "--query-compute-apps=pid,used_memory --format=csv,noheader,nounits"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"sleep {delay}\n"
        'here=$(dirname "$0")\n'
        f'if [ "$*" = "{q_gpu}" ]; then cat "$here/gpus.csv"; exit {1 if fail else 0}; fi\n'
        f'if [ "$*" = "{q_apps}" ]; then cat "$here/apps.csv"; exit {1 if fail else 0}; fi\n'
        "exit 2\n"
    )
    script.chmod(0o755)


GPUS_CSV = b"# \xff stray byte\n0, GPU-a, 80, 1000\n1, GPU-b, 40, 3000\n"


def test_a_container_of_several_processes_is_measured_as_one_task(tmp_path: Path) -> None:
    """nproc_per_node: local ranks 50 and 70 (and 50's child) count together, a root given twice once."""
    proc = tmp_path / "proc"
    plant_proc(proc, 50, 1, ticks=100, rss_kib=10_240)
    plant_proc(proc, 51, 50, ticks=100, rss_kib=1_024)
    plant_proc(proc, 70, 1, ticks=300, rss_kib=20_480)
    plant_proc(proc, 60, 1, ticks=900, rss_kib=99_999)  # not ours
    sampler = U.UsageSampler([50, 70, 50], visible_gpus=None, want_gpus=False, proc=proc)
    sampler.ticks = 100.0
    sampler.sample()
    u = sampler.stop()
    assert u is not None and u.cpu_seconds == 5.0 and u.peak_rss_bytes == 31 << 20


def _gpu_sampler(tmp_path: Path, *, visible: str | None = "1", want: bool = True) -> U.UsageSampler:
    proc = tmp_path / "proc"
    plant_proc(proc, 50, 1, ticks=100, rss_kib=1024)
    plant_proc(proc, 51, 50, ticks=100, rss_kib=1024)
    plant_proc(proc, 60, 1, ticks=100, rss_kib=1024)
    # PATH from env only: the fake is found there and nowhere else
    return U.UsageSampler(50, visible_gpus=visible, want_gpus=want, proc=proc, env={"PATH": str(tmp_path / "bin")})


def test_the_sampler_asks_nvidia_smi_for_the_task_s_gpus_and_its_processes_memory(tmp_path: Path) -> None:
    """GPU 1 only (CUDA_VISIBLE_DEVICES), and the GPU memory of the tree's pids (50, 51), not pid 999's."""
    plant_smi(tmp_path / "bin", GPUS_CSV, b"50, 700\n51, 100\n999, 5000\n")
    sampler = _gpu_sampler(tmp_path)
    assert sampler.daemon and sampler.name == "tony-usage", "a daemon: it never keeps the executor alive"
    sampler.sample()
    u = sampler.snapshot()
    assert u is not None
    assert (u.gpus_seen, u.peak_gpu_util, u.peak_gpu_memory_bytes) == (1, 40.0, 800 << 20)


def test_in_a_pid_namespace_the_gpus_own_memory_counts(tmp_path: Path) -> None:
    """nvidia-smi's pids are the host's: none is the tree's, so the task's GPUs' memory in use stands in."""
    plant_smi(tmp_path / "bin", GPUS_CSV, b"7, 700\n")
    sampler = _gpu_sampler(tmp_path, visible=None)
    sampler.sample()
    u = sampler.snapshot()
    assert u is not None and (u.gpus_seen, u.peak_gpu_memory_bytes, u.peak_gpu_util) == (2, 4000 << 20, 60.0)


@pytest.mark.parametrize("how", ["fails", "hangs", "not-wanted"])
def test_no_gpu_figures_when_nvidia_smi_fails_hangs_or_is_not_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Memory and CPU are sampled all the same; the GPU figures stay empty (not the failed run's output)."""
    monkeypatch.setattr(U, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    plant_smi(tmp_path / "bin", GPUS_CSV, b"50, 700\n", fail=how == "fails", delay=3.0 if how == "hangs" else 0.0)
    sampler = _gpu_sampler(tmp_path, want=how != "not-wanted")
    sampler.sample()
    u = sampler.snapshot()
    assert u is not None and u.samples == 1 and u.peak_rss_bytes == 2048 << 10
    assert (u.gpus_seen, u.peak_gpu_util, u.peak_gpu_memory_bytes) == (None, None, None)


@pytest.mark.parametrize(("sysconf", "cpu_seconds"), [(250, 2.0), (None, 5.0)])
def test_cpu_ticks_come_from_the_system_or_default_to_100_hz(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sysconf: int | None, cpu_seconds: float
) -> None:
    """500 ticks are 2 s at the system's 250 Hz, and 5 s at Linux's usual 100 Hz where it cannot be asked."""

    def fake(name: str) -> int:
        if name == "SC_CLK_TCK" and sysconf is not None:
            return sysconf
        raise ValueError(name)

    proc = tmp_path / "proc"
    plant_proc(proc, 50, 1, ticks=500, rss_kib=1)
    monkeypatch.setattr(U.os, "sysconf", fake)
    sampler = U.UsageSampler(50, visible_gpus=None, want_gpus=False, proc=proc)
    sampler.sample()
    u = sampler.stop()
    assert u is not None and u.cpu_seconds == cpu_seconds


def test_a_failed_sample_is_logged_and_sampling_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A look that raises must not end the thread (nor touch training): the next look still happens."""
    sampler = U.UsageSampler(50, visible_gpus=None, want_gpus=False, proc=tmp_path, interval=0.0)
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("boom")
        sampler.stop_event.set()

    monkeypatch.setattr(sampler, "sample", flaky)
    with caplog.at_level(logging.WARNING, logger="tony.usage"):
        sampler.run()  # in this thread: returns once the second look stops it
    assert len(calls) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.name == "tony.usage"]
    assert message.startswith("sampling the training process's use") and message.endswith(": boom")


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
