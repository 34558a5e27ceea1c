"""The two lanes of ``make test-open`` share one cluster: a ``whole_cluster`` test holds it alone.

tests/_lanes.py's readers-writer lock, between threads (each opens the lock files itself, so
each holds its own ``flock``, as the lanes' processes do): an exclusive holder waits for the
shared one in the other lane, and a shared test that comes after it waits behind it rather
than starving it. Who is blocked is read from ``/proc/locks`` (a waiter is listed with ``->``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests._lanes import cluster_share, lanes_active
from tests._util import wait_until


def _waiters_on(path: Path) -> int:
    """How many lock requests are blocked on ``path`` (``/proc/locks`` lines with ``->``)."""
    inode = f":{os.stat(path).st_ino} "
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if "->" in line and inode in line)


class Holder(threading.Thread):
    """Holds the cluster (shared or exclusive) from when it gets it until ``release`` is set."""

    def __init__(self, home: Path, exclusive: bool, name: str, order: list[str]) -> None:
        super().__init__(daemon=True)
        self.home, self.exclusive, self.label, self.order = home, exclusive, name, order
        self.inside = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        with cluster_share(self.home, self.exclusive):
            self.order.append(self.label)
            self.inside.set()
            self.release.wait(60)


def test_an_exclusive_test_waits_for_the_other_lane_and_is_not_starved_by_it(tmp_path: Path) -> None:
    order: list[str] = []
    a = Holder(tmp_path, False, "shared-a", order)
    a.start()
    assert a.inside.wait(30)
    whole = Holder(tmp_path, True, "exclusive", order)
    whole.start()
    wait_until(lambda: _waiters_on(tmp_path / "lanes.lock"), 30, "the exclusive test to wait for the shared one")
    assert not whole.inside.is_set()
    b = Holder(tmp_path, False, "shared-b", order)
    b.start()
    # b queues behind the waiting exclusive test (at the turnstile), though it could share with a.
    wait_until(lambda: _waiters_on(tmp_path / "lanes.turnstile"), 30, "the later shared test to queue")
    assert not b.inside.is_set(), "a shared test slipped in ahead of the waiting exclusive one"
    a.release.set()
    assert whole.inside.wait(30)
    assert not b.inside.is_set(), "a shared test ran beside the exclusive one"
    whole.release.set()
    assert b.inside.wait(30)
    b.release.set()
    for t in (a, whole, b):
        t.join(30)
    assert order == ["shared-a", "exclusive", "shared-b"]


def test_two_shared_tests_run_side_by_side(tmp_path: Path) -> None:
    order: list[str] = []
    first, second = Holder(tmp_path, False, "1", order), Holder(tmp_path, False, "2", order)
    first.start()
    assert first.inside.wait(30)
    second.start()
    assert second.inside.wait(30), "a shared test waited for another shared one"
    first.release.set()
    second.release.set()
    first.join(30)
    second.join(30)


def test_only_make_tests_lanes_take_the_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """By hand pytest is one lane: no lock; under make's TONY_TEST_LANES=1, with a cluster home, the lock."""
    monkeypatch.delenv("TONY_TEST_LANES", raising=False)
    monkeypatch.setenv("TONY_DEVCLUSTER_HOME", str(tmp_path))
    assert not lanes_active()
    monkeypatch.setenv("TONY_TEST_LANES", "1")
    assert lanes_active()
    monkeypatch.delenv("TONY_DEVCLUSTER_HOME")
    assert not lanes_active()
