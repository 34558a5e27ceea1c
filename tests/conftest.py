"""Fixtures for the tests that run on the real local YARN + HDFS cluster.

The cluster is the one `make cluster-up` starts (`make test` starts and stops
it); running pytest by hand starts it too if it is not up, and leaves it up.
Nothing here runs at import: the unit tests need neither Java nor a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._cluster import DEVCLUSTER, export_cluster_env
from tests._util import rm_apps

ACTIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"

#: Set by `make test`, `make test-secure` and `make test-chaos` (so by CI): there every collected
#: test must run, and a skip (an unset principal, no Chromium, a host name that does not resolve
#: to loopback) fails the run instead of leaving it green with nothing proven.
MUST_RUN_ENV = "TONY_TESTS_MUST_RUN"
#: Names the part of `make test` this pytest run is (open, secure, chaos): its counts are written
#: to test-artifacts/parts/<part>.json, and `make test` prints them all at the end.
PART_ENV = "TONY_TEST_PART"
PARTS_DIR = Path(__file__).resolve().parents[1] / "test-artifacts" / "parts"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``TONY_TESTS_MUST_RUN=1`` a skipped test is a failed one, whatever skipped it."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and os.environ.get(MUST_RUN_ENV) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where every test must run ({MUST_RUN_ENV}=1): {reason}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int) -> None:
    """How many tests this part ran, for `make test`'s closing lines."""
    part = os.environ.get(PART_ENV)
    if not part:
        return
    counts = {key: len(terminalreporter.stats.get(key, [])) for key in ("passed", "failed", "error", "skipped")}
    counts["exit_status"] = int(exitstatus)
    PARTS_DIR.mkdir(parents=True, exist_ok=True)
    (PARTS_DIR / f"{part}.json").write_text(json.dumps(counts))


@dataclass(frozen=True)
class Cluster:
    rm_url: str
    webhdfs_url: str
    user: str
    home: Path
    env: dict[str, str]


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    up = subprocess.run([sys.executable, str(DEVCLUSTER), "up"], capture_output=True, text=True)
    if up.returncode != 0:
        pytest.fail(f"the local cluster did not come up:\n{up.stderr[-4000:]}")
    env = export_cluster_env()
    return Cluster(
        rm_url=env["TONY_RM_URL"],
        webhdfs_url=env["TONY_WEBHDFS_URL"],
        user=env["TONY_WEBHDFS_USER"],
        home=Path(env["TONY_DEVCLUSTER_HOME"]),
        env=env,
    )


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
    from airflow_provider_tony.yarn.client import TonyClient

    leftovers = rm_apps(cluster.rm_url, states=ACTIVE_STATES, tag=tag)
    if leftovers:
        with TonyClient.from_env() as client:  # the RM's REST API: no skein driver JVM
            for app in leftovers:
                client.kill(app["id"])


@pytest.fixture(scope="session")
def tony_client(cluster: Cluster) -> Iterator[TonyClient]:  # noqa: F821
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        yield client


@pytest.fixture
def python_exe() -> str:
    """The interpreter containers run: this venv's (it has skein, TensorFlow, the runtime)."""
    return sys.executable
