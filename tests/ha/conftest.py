"""The HA tests run on a cluster of their own: the HA profile (``devcluster/dc_ha.py``).

ZooKeeper, two ResourceManagers (rm1, rm2) and two NameNodes (nn1, nn2) of nameservice
``tony``, in ``.devcluster-ha`` (``TONY_HA_HOME``) on the open cluster's port base + 1200
(``TONY_HA_PORT_BASE``), started once for the session and taken down at its end (``make
test-ha`` takes it down again, whatever happened). Every test starts on the whole cluster:
whatever an earlier test killed comes back as a standby (``devcluster up``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._cluster import DEFAULT_PORT_BASE, REPO, export_cluster_env
from tests._ha import down_unless_kept, every_daemon_back, ha_apps

HA_PORT_OFFSET = 1200


def use_ha_cluster() -> None:
    """Point this process (and what it starts) at the HA cluster, never at another one."""
    default_home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster"))
    os.environ.setdefault("TONY_DEVCLUSTER_JARS", str(default_home / "jars"))
    open_base = int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", str(DEFAULT_PORT_BASE)))
    os.environ["TONY_DEVCLUSTER_HA"] = "1"
    os.environ["TONY_DEVCLUSTER_HOME"] = os.environ.get("TONY_HA_HOME", str(REPO / ".devcluster-ha"))
    os.environ["TONY_DEVCLUSTER_PORT_BASE"] = os.environ.get("TONY_HA_PORT_BASE", str(open_base + HA_PORT_OFFSET))
    for name in ("TONY_DEVCLUSTER_SECURE", "TONY_DEVCLUSTER_NODEMANAGERS"):
        os.environ.pop(name, None)


use_ha_cluster()
export_cluster_env()


@pytest.fixture(scope="session", autouse=True)
def ha_cluster_down() -> Iterator[None]:
    yield
    down_unless_kept()


@pytest.fixture(autouse=True)
def every_daemon_up(cluster: Any) -> None:
    every_daemon_back()


@pytest.fixture
def app_tag(cluster: Any) -> Iterator[str]:
    """Like the shared one, but its cleanup asks the active RM (the addresses are a list here)."""
    tag = f"pytest-{uuid.uuid4().hex[:12]}"
    yield tag
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        for app in ha_apps(tag, states="NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"):
            client.kill(app["id"])


@pytest.fixture
def hdfs(cluster: Any) -> Any:
    """The runtime's own failover client over both NameNodes."""
    from airflow_provider_tony.runtime.webhdfs_failover import FailoverInsecureClient

    return FailoverInsecureClient(os.environ["TONY_WEBHDFS_URL"], user=cluster.user)


@pytest.fixture
def ckpt_dir(hdfs: Any) -> Iterator[str]:
    path = f"/tmp/pytest-ha-{uuid.uuid4().hex[:8]}"
    yield path
    hdfs.delete(path, recursive=True)
    hdfs.delete(f"{path}-model", recursive=True)
