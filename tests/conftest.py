"""Fixtures for the tests that run on the real local YARN + HDFS cluster.

The cluster is the one `make cluster-up` starts (`make test` starts and stops
it); running pytest by hand starts it too if it is not up, and leaves it up.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests._util import rm_apps

REPO = Path(__file__).resolve().parent.parent
DEVCLUSTER = REPO / "devcluster" / "devcluster.py"
ACTIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


@dataclass(frozen=True)
class Cluster:
    rm_url: str
    webhdfs_url: str
    user: str
    home: Path
    env: dict[str, str]


def _parse_exports(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("export "):
            continue
        name, _, value = line[len("export "):].partition("=")
        if name == "PATH":
            # `export PATH=<shim dir>:"$PATH"`: keep the shim dir, expand the rest.
            env["PATH"] = shlex.split(value.replace('"$PATH"', ""))[0] + os.environ.get("PATH", "")
        else:
            env[name] = shlex.split(value)[0]
    return env


def _cluster_env() -> dict[str, str]:
    out = subprocess.run([sys.executable, str(DEVCLUSTER), "env"], capture_output=True, text=True,
                         check=True).stdout
    return _parse_exports(out)


# Exported before any test module imports skein: skein reads SKEIN_CONFIG at
# import time, and the provider reads the AIRFLOW_CONN_* connection.
CLUSTER_ENV = _cluster_env()
os.environ.update(CLUSTER_ENV)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    up = subprocess.run([sys.executable, str(DEVCLUSTER), "up"], capture_output=True, text=True)
    if up.returncode != 0:
        pytest.fail(f"the local cluster did not come up:\n{up.stderr[-4000:]}")
    env = CLUSTER_ENV
    return Cluster(rm_url=env["TONY_RM_URL"], webhdfs_url=env["TONY_WEBHDFS_URL"],
                   user=env["TONY_WEBHDFS_USER"], home=Path(env["TONY_DEVCLUSTER_HOME"]), env=env)


@pytest.fixture(scope="session")
def skein_client(cluster: Cluster) -> Iterator[skein.Client]:  # noqa: F821
    import skein

    with skein.Client() as client:
        yield client


@pytest.fixture
def app_tag(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[str]:
    """A YARN application tag unique to this test; its apps are killed afterwards.

    Every test that submits tags its applications with this, so that cleanup
    never touches another test's (or another checkout's) applications.
    """
    tag = f"pytest-{uuid.uuid4().hex[:12]}"
    yield tag
    import skein

    leftovers = rm_apps(cluster.rm_url, states=ACTIVE_STATES, tag=tag)
    if leftovers:
        with skein.Client() as client:
            for app in leftovers:
                client.kill_application(app["id"])


@pytest.fixture(scope="session")
def tony_client(cluster: Cluster) -> Iterator[TonyClient]:  # noqa: F821
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        yield client


@pytest.fixture
def python_exe() -> str:
    """The interpreter containers run: this venv's (it has skein, TensorFlow, the runtime)."""
    return sys.executable
