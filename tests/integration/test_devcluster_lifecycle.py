"""`up` is idempotent and `down` leaves nothing behind, on a second cluster.

A separate state directory and port base, sharing the jar cache, so the
cluster the other tests use is untouched (and two clusters run side by side).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._util import get_json

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = [sys.executable, str(REPO / "devcluster" / "devcluster.py")]
DAEMONS = ("namenode", "datanode", "resourcemanager", "nodemanager")


def _pids(home: Path) -> dict[str, int]:
    return {d: int((home / "run" / f"{d}.pid").read_text()) for d in DAEMONS}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _java_processes_using(conf: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "java" in cmd and str(conf) in cmd:
                found.append(int(proc.name))
    return found


def test_up_twice_then_down(cluster, tmp_path: Path) -> None:
    home = tmp_path / "second"
    env = {**os.environ, "TONY_DEVCLUSTER_HOME": str(home), "TONY_DEVCLUSTER_PORT_BASE": "19500",
           "TONY_DEVCLUSTER_JARS": str(cluster.home / "jars")}
    try:
        first = subprocess.run([*DEVCLUSTER, "up"], env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        pids = _pids(home)
        assert get_json("http://127.0.0.1:19588/ws/v1/cluster/metrics")["clusterMetrics"]["activeNodes"] == 1

        second = subprocess.run([*DEVCLUSTER, "up"], env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-3000:]
        assert _pids(home) == pids, "a second `up` must reuse the running daemons"
        assert "jars cached" in second.stderr and "fetching" not in second.stderr

        status = subprocess.run([*DEVCLUSTER, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0
        assert "http://127.0.0.1:19588/cluster" in status.stdout
    finally:
        down = subprocess.run([*DEVCLUSTER, "down"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids.values())
    assert _java_processes_using(home / "conf") == []
    status = subprocess.run([*DEVCLUSTER, "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 3 and "up (pid" not in status.stdout
