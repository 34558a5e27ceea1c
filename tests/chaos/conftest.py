"""Chaos tests run on a multi-node cluster of their own, never on the shared one.

They stop NodeManagers and restart daemons, so they get a cluster that no
other test (or other checkout) uses: its own state directory and port range,
four NodeManagers (three unlabelled, one with the gpu label), started once for the session and taken down at its end.
The variables are forced, not defaulted: a shell that exported the shared
cluster's ``TONY_DEVCLUSTER_HOME`` must not point these tests at it. The
Hadoop jars are shared with the default cluster's cache (read only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = REPO / "devcluster" / "devcluster.py"
NODEMANAGERS = 4  # three unlabelled nodes for the spread workers, and the gpu-labelled one

_default_home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster"))
os.environ.setdefault("TONY_DEVCLUSTER_JARS", str(_default_home / "jars"))
os.environ["TONY_DEVCLUSTER_HOME"] = os.environ.get("TONY_CHAOS_HOME", str(REPO / ".devcluster-chaos"))
os.environ["TONY_DEVCLUSTER_PORT_BASE"] = os.environ.get("TONY_CHAOS_PORT_BASE", "19900")
os.environ["TONY_DEVCLUSTER_NODEMANAGERS"] = str(NODEMANAGERS)
os.environ.setdefault("TONY_DEVCLUSTER_NM_MEMORY_MB", "8192")

from tests._cluster import export_cluster_env  # noqa: E402 - after the variables are set

export_cluster_env()


def devcluster(*args: str, timeout: float = 300) -> None:
    proc = subprocess.run([sys.executable, str(DEVCLUSTER), *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"devcluster {' '.join(args)} failed:\n{proc.stderr[-3000:]}"


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


@pytest.fixture
def stopped_nodes() -> Iterator[list[int]]:
    """NodeManagers a test stopped; started again afterwards, so the next test has every node."""
    stopped: list[int] = []
    yield stopped
    for index in stopped:
        devcluster("start-nm", str(index))


# Airflow's metadata database for the re-attach test, as the integration tests make it.
from tests.integration.test_airflow import airflow_env  # noqa: E402, F401 - a fixture
