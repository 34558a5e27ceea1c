"""Chaos and multi-node tests run on a four-node cluster of their own, never on the shared one.

They stop NodeManagers and restart daemons, or need several nodes and the
``gpu`` node, so they get a cluster that no other test (or other checkout)
uses: its own state directory and port range (``tests._cluster.use_chaos_cluster``:
the open cluster's port base + 900 unless ``TONY_CHAOS_PORT_BASE`` says
otherwise), four NodeManagers (three unlabelled, one with the ``gpu`` label),
started once for the session and taken down at its end (``make test-chaos``
takes it down again, whatever happened).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests._cluster import DEVCLUSTER, devcluster, export_cluster_env, use_chaos_cluster

use_chaos_cluster()
export_cluster_env()


@pytest.fixture(scope="session", autouse=True)
def chaos_cluster_down() -> Iterator[None]:
    """Nothing left running: this session's own cluster goes down at its end."""
    yield
    if os.environ.get("TONY_CHAOS_KEEP") != "1":  # kept between local runs only when asked
        devcluster("down")


@pytest.fixture
def hdfs(cluster: Any) -> Any:
    from hdfs import InsecureClient

    return InsecureClient(cluster.webhdfs_url, user=cluster.user)


@pytest.fixture
def ckpt_dir(hdfs: Any) -> Iterator[str]:
    path = f"/tmp/pytest-chaos-{uuid.uuid4().hex[:8]}"
    yield path
    hdfs.delete(path, recursive=True)


@pytest.fixture(autouse=True)
def every_daemon_up(cluster: Any) -> None:
    """Each test starts on the whole cluster: whatever an earlier test stopped (a NodeManager, the
    RM, the NameNode), or failed to start again, is started here (``devcluster up`` starts only
    what is missing and waits until every NodeManager is active). Lazily, before the next test
    rather than in the teardown of the one that stopped it: after the session's last test the
    cluster goes down anyway, so that restart is never paid for, and no stopped node can leak."""
    if subprocess.run([sys.executable, str(DEVCLUSTER), "status"], capture_output=True, timeout=60).returncode:
        devcluster("up")


@pytest.fixture
def stopped_nodes() -> list[int]:
    """Where a test notes the NodeManagers it stopped (``every_daemon_up`` starts them again)."""
    return []
