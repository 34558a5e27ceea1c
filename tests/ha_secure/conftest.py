"""The Kerberized HA tests run on a cluster of their own: the HA profile with Kerberos.

ZooKeeper, two ResourceManagers and two NameNodes of nameservice ``tony`` as in ``tests/ha``,
plus a KDC, SPNEGO on every web server, delegation tokens in every container, and a second,
separate HDFS (nameservice ``warehouse`` in the clients' conf), in ``.devcluster-ha-secure``
(``TONY_SECURE_HA_HOME``) on the open cluster's port base + 1500
(``TONY_SECURE_HA_PORT_BASE``). Started once for the session, taken down at its end (``make
test-ha-secure`` takes it down again, whatever happened); a daemon a test killed comes back as
the standby before the next test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._cluster import DEFAULT_PORT_BASE, REPO, export_cluster_env
from tests._ha import down_unless_kept, every_daemon_back

SECURE_HA_PORT_OFFSET = 1500


def use_secure_ha_cluster() -> None:
    """Point this process (and what it starts) at the Kerberized HA cluster, never at another one."""
    default_home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster"))
    os.environ.setdefault("TONY_DEVCLUSTER_JARS", str(default_home / "jars"))
    open_base = int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", str(DEFAULT_PORT_BASE)))
    os.environ["TONY_DEVCLUSTER_HA"] = "1"
    os.environ["TONY_DEVCLUSTER_SECURE"] = "1"
    os.environ["TONY_DEVCLUSTER_HOME"] = os.environ.get("TONY_SECURE_HA_HOME", str(REPO / ".devcluster-ha-secure"))
    os.environ["TONY_DEVCLUSTER_PORT_BASE"] = os.environ.get(
        "TONY_SECURE_HA_PORT_BASE", str(open_base + SECURE_HA_PORT_OFFSET)
    )
    os.environ.pop("TONY_DEVCLUSTER_NODEMANAGERS", None)


use_secure_ha_cluster()
export_cluster_env()


@pytest.fixture(scope="session", autouse=True)
def secure_ha_cluster_down() -> Iterator[None]:
    yield
    down_unless_kept()


@pytest.fixture(autouse=True)
def every_daemon_up(cluster: Any) -> None:
    every_daemon_back()


@pytest.fixture(scope="session")
def krb(cluster: Any) -> Iterator[Any]:
    """The submitting principal's client (keytab from ``devcluster.py env``), over both RMs and NameNodes."""
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        assert client.kerberos
        yield client


@pytest.fixture
def tag(krb: Any) -> Iterator[str]:
    """A tag for this test's applications; cleanup asks whichever RM is active, over SPNEGO."""
    value = f"pytest-{uuid.uuid4().hex[:12]}"
    yield value
    for app in krb.find_by_tags([value]):
        krb.kill(app.app_id)


@pytest.fixture
def ckpt(krb: Any) -> Iterator[str]:
    path = f"/tmp/pytest-ha-secure-{uuid.uuid4().hex[:8]}"
    yield path
    for folder in (path, f"{path}-model"):
        krb.hdfs().delete(folder, recursive=True)
