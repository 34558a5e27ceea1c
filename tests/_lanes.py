"""Pytest lanes on one cluster: most tests share it, a ``whole_cluster`` test has it alone.

``make test-open`` runs the open cluster's tests in three pytest processes side by side (the
Makefile's ``OPEN2_FILES`` in one, the unit tests and ``UNIT_LANE_FILES`` in another, the rest
in the third): most of an integration test's time is spent waiting on YARN (container launches,
heartbeats, Airflow's start-up), so more lanes fill cores that would idle. A few tests cannot
share the cluster with another lane's test: the preemption test fills the cluster and needs its
containers to be the ones YARN preempts, the HDFS outage tests stop the NameNode under everyone.
They carry the ``whole_cluster`` mark and hold the cluster alone.

The rule is a readers-writer lock between the lanes' processes (``flock`` on two files in the
cluster's home): every test of a lane holds the cluster shared for its set-up, call and
teardown; a ``whole_cluster`` test holds it exclusively. The turnstile keeps a waiting exclusive
test from being starved: once it queues, the other lane's next test waits behind it. It is
active only where ``TONY_TEST_LANES=1`` (set by the Makefile when lanes run side by side); a
pytest run by hand is one lane and takes no lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LANES_ENV = "TONY_TEST_LANES"
MARK = "whole_cluster"


def lanes_active() -> bool:
    return os.environ.get(LANES_ENV) == "1" and bool(os.environ.get("TONY_DEVCLUSTER_HOME"))


@contextmanager
def cluster_share(home: Path, exclusive: bool) -> Iterator[None]:
    """Hold the cluster in ``home`` shared (any number of tests) or exclusively (this test alone)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "lanes.turnstile", "a+") as turnstile, open(home / "lanes.lock", "a+") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            # An exclusive test keeps the turnstile until it holds the cluster: a shared test
            # that comes after it queues behind it instead of slipping in again and again.
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
