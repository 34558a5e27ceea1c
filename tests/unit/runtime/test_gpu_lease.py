"""GPU leases: the pure choice, and real flock leases between processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from airflow_provider_tony.runtime import gpu_claim
from airflow_provider_tony.runtime.gpu_lease import (
    DEFAULT_LEASE_ROOT,
    GpuLeaseError,
    GpuLeases,
    choose_devices,
    lease_dir,
    parse_nm_gpu_resource,
    yarn_assigned_gpus,
)
from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import wait_until
from tests.unit.support.paths import REPO

FOUR = ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    ("devices", "wanted", "busy", "expected"),
    [
        (FOUR, 2, [], ["0", "1"]),
        (FOUR, 2, ["0"], ["1", "2"]),
        (FOUR, 2, ["0", "2"], ["1", "3"]),
        (FOUR, 3, ["1", "2"], None),  # only 2 free: none, never a partial set
        (FOUR, 0, FOUR, []),
        (["10", "2", "1"], 2, [], ["1", "2"]),  # numeric order, not text order
        (["0", "0", "1"], 2, [], ["0", "1"]),  # duplicates count once
        ([], 1, [], None),
    ],
)
def test_choose_devices(devices: list[str], wanted: int, busy: list[str], expected: list[str] | None) -> None:
    assert choose_devices(devices, wanted, busy) == expected


def test_choose_devices_rejects_a_negative_count() -> None:
    with pytest.raises(GpuLeaseError, match="-1"):
        choose_devices(FOUR, -1, [])


def test_lease_dir_is_per_host_and_overridable() -> None:
    assert lease_dir({}, "127.0.0.3") == Path(DEFAULT_LEASE_ROOT) / "127.0.0.3"
    assert lease_dir({"TONY_GPU_LEASE_DIR": "/x"}, "a/b") == Path("/x/a_b")


def test_two_lease_holders_in_one_process_get_disjoint_sets(tmp_path: Path) -> None:
    a, b = GpuLeases(tmp_path, "a"), GpuLeases(tmp_path, "b")
    assert a.try_acquire(FOUR, 2) == ["0", "1"]
    assert b.try_acquire(FOUR, 2) == ["2", "3"]
    c = GpuLeases(tmp_path, "c")
    assert c.try_acquire(FOUR, 1) is None
    assert c.devices == []  # all-or-nothing: it holds nothing after failing
    assert c.holders(FOUR) == {"0": "a", "1": "a", "2": "b", "3": "b"}
    a.release()
    assert c.try_acquire(FOUR, 1) == ["0"]


def test_lease_files_and_dirs_are_usable_by_every_user(tmp_path: Path) -> None:
    directory = tmp_path / "leases" / "host"
    old = os.umask(0o022)
    try:
        assert GpuLeases(directory, "a").try_acquire(FOUR, 1) == ["0"]
    finally:
        os.umask(old)
    assert (directory / "gpu-0.lock").stat().st_mode & 0o777 == 0o666
    assert directory.stat().st_mode & 0o7777 == 0o1777
    assert (tmp_path / "leases").stat().st_mode & 0o7777 == 0o1777


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from airflow_provider_tony.runtime.gpu_lease import GpuLeases
    leases = GpuLeases(Path(sys.argv[1]), "holder-" + sys.argv[2])
    print(",".join(leases.try_acquire(["0", "1", "2", "3"], int(sys.argv[2])) or []), flush=True)
    time.sleep(600)
""")


def _holder(tmp_path: Path, wanted: int) -> tuple[subprocess.Popen[str], list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), str(wanted)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    return proc, line.split(",") if line else []


def test_leases_across_processes_are_disjoint_and_freed_when_the_holder_is_killed(tmp_path: Path) -> None:
    proc, held = _holder(tmp_path, 3)
    try:
        assert held == ["0", "1", "2"]
        mine = GpuLeases(tmp_path, "me")
        assert mine.try_acquire(FOUR, 2) is None  # one left: waits, never shares
        assert mine.try_acquire(FOUR, 1) == ["3"]
        mine.release()
        assert GpuLeases(tmp_path, "x").holders(FOUR) == dict.fromkeys(held, "holder-3")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    # SIGKILL leaves no chance to clean up: the kernel dropped the locks.
    assert GpuLeases(tmp_path, "after").try_acquire(FOUR, 4) == FOUR


def test_leases_pass_to_a_child_and_live_as_long_as_it(tmp_path: Path) -> None:
    """The executor hands its lease descriptors to the training process."""
    leases = GpuLeases(tmp_path, "executor")
    assert leases.try_acquire(FOUR, 2) == ["0", "1"]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], pass_fds=leases.fds)
    try:
        leases.release()  # the executor is gone; the training process still runs
        assert GpuLeases(tmp_path, "other").try_acquire(FOUR, 3) is None
    finally:
        child.kill()
        child.wait(timeout=30)
    wait_until(lambda: GpuLeases(tmp_path, "other").holders(FOUR) == {}, 10, "the child's leases to drop")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_acquire_waits_then_fails_naming_the_holders(tmp_path: Path) -> None:
    holder = GpuLeases(tmp_path, "container_1 (application_9 worker:0)")
    holder.try_acquire(FOUR, 3)
    clock, waits = FakeClock(), []
    with pytest.raises(GpuLeaseError) as err:
        GpuLeases(tmp_path, "me").acquire(FOUR, 2, timeout=5, on_wait=waits.append, clock=clock, sleep=clock.sleep)
    assert "container_1 (application_9 worker:0)" in str(err.value)
    assert "wants 2" in str(err.value) and "5s" in str(err.value)
    assert clock.now == pytest.approx(5)
    assert len(waits) == 1  # said once that it waits, not every poll


def test_acquire_gets_the_gpus_once_they_are_freed(tmp_path: Path) -> None:
    holder = GpuLeases(tmp_path, "h")
    holder.try_acquire(FOUR, 4)
    clock = FakeClock()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now >= 3:
            holder.release()

    got = GpuLeases(tmp_path, "me").acquire(FOUR, 2, timeout=60, clock=clock, sleep=sleep)
    assert got == ["0", "1"] and clock.now == pytest.approx(3)


def test_acquire_fails_at_once_when_the_node_has_too_few_gpus(tmp_path: Path) -> None:
    clock = FakeClock()
    with pytest.raises(GpuLeaseError, match="has 2 GPU.*wants 3"):
        GpuLeases(tmp_path, "me").acquire(["0", "1"], 3, timeout=60, clock=clock, sleep=clock.sleep)
    assert clock.slept == []


def test_parse_nm_gpu_resource() -> None:
    doc = {
        "totalGpuDevices": [{"index": i, "minorNumber": i} for i in range(4)],
        "assignedGpuDevices": [
            {"index": 2, "minorNumber": 2, "containerId": "c_2"},
            {"index": 0, "minorNumber": 0, "containerId": "c_1"},
            {"index": 3, "minorNumber": 3, "containerId": "c_1"},
        ],
    }
    assert parse_nm_gpu_resource(doc, "c_1") == ["0", "3"]
    assert parse_nm_gpu_resource(doc, "c_9") is None
    one = {"assignedGpuDevices": {"index": 1, "minorNumber": 1, "containerId": "c_1"}}
    assert parse_nm_gpu_resource(one, "c_1") == ["1"]
    assert parse_nm_gpu_resource({"assignedGpuDevices": []}, "c_1") is None


def test_yarn_assigned_gpus_treats_any_failure_as_unknown() -> None:
    def boom(url: str) -> dict:
        raise OSError("connection refused")

    assert yarn_assigned_gpus("h:1", "c_1", fetch=boom) is None
    assert yarn_assigned_gpus(None, "c_1", fetch=boom) is None
    seen: list[str] = []

    def ok(url: str) -> dict:
        seen.append(url)
        return {"assignedGpuDevices": [{"index": 1, "containerId": "c_1"}]}

    assert yarn_assigned_gpus("h:8042", "c_1", fetch=ok) == ["1"]
    assert seen == ["http://h:8042/ws/v1/node/resources/yarn.io%2Fgpu"]


def _spec(gpus: int) -> JobSpec:
    return JobSpec.from_dict(
        {"name": "g", "roles": {"worker": {"instances": 1, "gpus": gpus, "script": "t.py"}}, "registration_timeout": 8}
    )


def test_take_gpus_leases_when_yarn_assigned_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_claim, "yarn_assigned_gpus", lambda *a: None)
    env = {"TONY_GPU_LEASE_DIR": str(tmp_path), "CONTAINER_ID": "c_1", "NM_HTTP_PORT": "1"}
    leases, got = gpu_claim.take_gpus(_spec(2), "worker", "worker:0", env, "h", FOUR, None, "app_1")
    assert leases is not None and got == ["0", "1"]
    other, got2 = gpu_claim.take_gpus(
        _spec(2), "worker", "worker:0", {**env, "CONTAINER_ID": "c_2"}, "h", FOUR, None, "app_2"
    )
    assert got2 == ["2", "3"]
    assert "c_1 (app_1 worker:0)" in GpuLeases(tmp_path / "h", "x").holders(FOUR)["0"]
    leases.release()
    assert other is not None
    other.release()


def test_take_gpus_prefers_what_yarn_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_claim, "yarn_assigned_gpus", lambda *a: ["3"])
    env = {"TONY_GPU_LEASE_DIR": str(tmp_path), "CONTAINER_ID": "c_1", "NM_HTTP_PORT": "1"}
    assert gpu_claim.take_gpus(_spec(1), "worker", "worker:0", env, "h", FOUR, None, "a") == (None, ["3"])
    # The NVIDIA runtime's pinning and CPU-only roles need no lease at all.
    assert gpu_claim.take_gpus(_spec(1), "worker", "worker:0", env, "h", FOUR, ["0"], "a") == (None, None)
    assert gpu_claim.take_gpus(_spec(0), "worker", "worker:0", env, "h", FOUR, None, "a") == (None, None)
    assert not (tmp_path / "h").exists()
