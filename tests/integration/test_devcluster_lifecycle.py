"""`up` is idempotent and `down` leaves nothing behind, on a second cluster.

A separate state directory and port base, sharing the jar cache, so the
cluster the other tests use is untouched (and two clusters run side by side).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests._util import get_json, load_script

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = [sys.executable, str(REPO / "devcluster" / "devcluster.py")]
DAEMONS = ("namenode", "datanode", "resourcemanager", "nodemanager")
# Port bases this test may use: 20000-31900 in steps of 100 (devcluster uses
# base+20..base+88). Clear of the default cluster (19000), of other fixed
# bases in the 19xxx range, and of Linux's ephemeral ports (32768 and up).
FIRST_BASE, SLOTS = 20000, 120


def _port_offsets() -> list[int]:
    """devcluster's own table of ports (offsets from the base), read from its source."""
    module = load_script("devcluster/devcluster.py", "devcluster_for_ports")
    return sorted(module.PORT_OFFSETS.values())


def _ports_free(base: int) -> bool:
    """Nothing listens on, or holds, any port the cluster at ``base`` would use."""
    for offset in _port_offsets():
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", base + offset))
            except OSError:
                return False
    return True


def port_base(checkout: Path = REPO) -> int:
    """A port base of this checkout's own: a hash of its path picks the slot.

    Concurrent checkouts (each with its own path) start from different slots;
    a slot whose ports are taken is skipped, so a collision moves on instead
    of failing.
    """
    start = int(hashlib.sha256(str(checkout.resolve()).encode()).hexdigest(), 16) % SLOTS
    for step in range(SLOTS):
        base = FIRST_BASE + 100 * ((start + step) % SLOTS)
        if _ports_free(base):
            return base
    raise RuntimeError(f"no free port base between {FIRST_BASE} and {FIRST_BASE + 100 * SLOTS}")


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
    base = port_base()
    rm = f"http://127.0.0.1:{base + 88}"
    print(f"second cluster on port base {base}")
    env = {
        **os.environ,
        "TONY_DEVCLUSTER_HOME": str(home),
        "TONY_DEVCLUSTER_PORT_BASE": str(base),
        "TONY_DEVCLUSTER_JARS": str(cluster.home / "jars"),
    }
    try:
        first = subprocess.run([*DEVCLUSTER, "up"], env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        pids = _pids(home)
        assert get_json(f"{rm}/ws/v1/cluster/metrics")["clusterMetrics"]["activeNodes"] == 1

        second = subprocess.run([*DEVCLUSTER, "up"], env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-3000:]
        assert _pids(home) == pids, "a second `up` must reuse the running daemons"
        assert "jars cached" in second.stderr and "fetching" not in second.stderr

        status = subprocess.run([*DEVCLUSTER, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0
        assert f"{rm}/cluster" in status.stdout
    finally:
        down = subprocess.run([*DEVCLUSTER, "down"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids.values())
    assert _java_processes_using(home / "conf") == []
    status = subprocess.run([*DEVCLUSTER, "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 3 and "up (pid" not in status.stdout


def test_port_base_is_per_checkout_and_skips_ports_in_use() -> None:
    mine = port_base()
    assert 20000 <= mine < 32000 and mine % 100 == 0, mine
    assert port_base() == mine, "the same checkout gets the same base"
    spread = {port_base(Path(f"/work/checkout-{i}")) for i in range(20)}
    assert len(spread) >= 10, f"checkouts are not spread over the slots: {sorted(spread)}"
    with socket.socket() as held:  # someone else's ResourceManager on our slot
        held.bind(("127.0.0.1", mine + 88))
        held.listen()
        moved = port_base()
        assert moved != mine and _ports_free(moved)
