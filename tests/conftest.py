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
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._airflow import AIRFLOW
from tests._cluster import DEVCLUSTER, REPO, export_cluster_env
from tests._lanes import MARK as WHOLE_CLUSTER
from tests._lanes import cluster_share, lanes_active
from tests._util import rm_apps, without_java

# Shared helpers that assert (the HA suites' failover): pytest rewrites their asserts as it does a test's.
pytest.register_assert_rewrite("tests._ha")

ACTIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"

#: Set by `make test`, `make test-secure` and `make test-chaos` (so by CI): there every collected
#: test must run, and a skip (an unset principal, no Chromium, a host name that does not resolve
#: to loopback) fails the run instead of leaving it green with nothing proven.
MUST_RUN_ENV = "TONY_TESTS_MUST_RUN"
#: Names the part of `make test` this pytest run is (open, secure, chaos): its counts are written
#: to test-artifacts/parts/<part>.json, and `make test` prints them all at the end.
PART_ENV = "TONY_TEST_PART"
PARTS_DIR = Path(__file__).resolve().parents[1] / "test-artifacts" / "parts"
#: A test at least this slow is named with its seconds and what it proves in the part's file
#: (``tests/_summary.py`` reports the slowest); the faster ones count in their file's total only.
NAMED_TEST_MIN_S = 1.0

#: This run's timings, for the part's file: when the session started, each test's seconds
#: (set-up, call and teardown together) and the first line of its docstring.
_TIMES: dict[str, Any] = {"started": time.monotonic(), "seconds": {}, "docs": {}}


def pytest_sessionstart(session: pytest.Session) -> None:
    _TIMES["started"] = time.monotonic()


def _what_it_proves(item: pytest.Item) -> str:
    """The first line of the test's docstring; without one, its name read as the sentence it is."""
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return first or item.name.split("[")[0].removeprefix("test_").replace("_", " ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Where two lanes share the cluster (tests/_lanes.py), a cluster test holds it shared, a
    ``whole_cluster`` one alone, from its set-up to its teardown."""
    if not lanes_active() or item.get_closest_marker("cluster") is None:
        yield
        return
    exclusive = item.get_closest_marker(WHOLE_CLUSTER) is not None
    with cluster_share(Path(os.environ["TONY_DEVCLUSTER_HOME"]), exclusive):
        yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    seconds: dict[str, float] = _TIMES["seconds"]
    seconds[report.nodeid] = seconds.get(report.nodeid, 0.0) + report.duration


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``TONY_TESTS_MUST_RUN=1`` a skipped test is a failed one, whatever skipped it."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if call.when == "setup":
        _TIMES["docs"][item.nodeid] = _what_it_proves(item)
    if report.skipped and os.environ.get(MUST_RUN_ENV) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where every test must run ({MUST_RUN_ENV}=1): {reason}"


def part_times() -> dict[str, Any]:
    """This run's wall seconds, seconds per test file (every test) and per test (the named ones)."""
    seconds: dict[str, float] = _TIMES["seconds"]
    files: dict[str, list[float]] = {}
    for nodeid, secs in seconds.items():
        entry = files.setdefault(nodeid.split("::", 1)[0], [0, 0.0])
        entry[0] += 1
        entry[1] += secs
    named = {n: round(s, 2) for n, s in seconds.items() if s >= NAMED_TEST_MIN_S}
    return {
        "wall_s": round(time.monotonic() - _TIMES["started"], 1),
        "files": {f: [int(n), round(s, 2)] for f, (n, s) in sorted(files.items())},
        "tests": named,
        "proves": {n: _TIMES["docs"].get(n, "") for n in named},
    }


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int) -> None:
    """How many tests this part ran and how long they took, for `make test`'s closing lines and time report."""
    part = os.environ.get(PART_ENV)
    if not part:
        return
    counts: dict[str, Any] = {
        key: len(terminalreporter.stats.get(key, [])) for key in ("passed", "failed", "error", "skipped")
    }
    counts["exit_status"] = int(exitstatus)
    PARTS_DIR.mkdir(parents=True, exist_ok=True)
    (PARTS_DIR / f"{part}.json").write_text(json.dumps({**counts, **part_times()}))


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


# A test module's own Airflow (its metadata database, no JDK): the integration, chaos and HA suites' DAG runs.
@pytest.fixture(scope="module")
def airflow_env(cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False",
    }
    # Airflow as its official image runs it: no JDK. dags_test fails when anything tried to start java.
    env = without_java(env, home / "no-java")
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env
