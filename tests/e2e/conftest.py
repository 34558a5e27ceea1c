"""The Airflow stack (PostgreSQL + api-server, scheduler, dag-processor, triggerer) for browser tests.

Started here and stopped at the end of the session; deferrable by default so
that runs go through the real triggerer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._cluster import export_cluster_env
from tests._util import JAVA_TRIPWIRE_ENV, assert_no_java_started, hide_jdks_prefix
from tests.e2e._support import admin_login, stack_home

export_cluster_env()  # before any e2e module imports skein or reads the Airflow connection

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STACK = [sys.executable, str(REPO / "devcluster" / "airflow_stack.py")]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Stack:
    url: str
    user: str
    password: str
    token: str

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The README-commands test starts and stops the stack itself on the fixture's ports and
    state: run it before any e2e test, so before the session fixture brings its stack up."""
    e2e = [i for i, item in enumerate(items) if Path(item.path).resolve().is_relative_to(HERE)]
    if not e2e:
        return
    first = [item for item in items if Path(item.path).name == "test_readme_commands.py"]
    rest = [item for item in items if item not in first]
    at = min(e2e)
    items[:] = rest[:at] + first + rest[at:]


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stack_processes(home: Path) -> dict[str, int]:
    """The live processes of an Airflow stack in ``home``: service -> pid (the pid files it wrote)."""
    found: dict[str, int] = {}
    for pidfile in sorted((home / "run").glob("*.pid")):
        text = pidfile.read_text().strip()
        if text.isdigit() and _alive(int(text)):
            found[pidfile.stem] = int(text)
    postmaster = home / "pgdata" / "postmaster.pid"
    if postmaster.exists():
        first = (postmaster.read_text().split() or [""])[0]
        if first.isdigit() and _alive(int(first)):
            found["postgres"] = int(first)
    return found


@pytest.fixture(scope="session")
def airflow_stack(cluster) -> Iterator[Stack]:
    """A stack of its own: one already running there (``make airflow-up``) is neither re-used
    (its settings are not the tests') nor stopped (it is not ours): the session fails, saying so."""
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}
    home = stack_home()
    already = stack_processes(home)
    if already:
        pytest.fail(
            f"an Airflow stack is already running from {home} ({already}); the e2e tests start and stop "
            "their own there: stop it first (make airflow-down)"
        )
    up = subprocess.run(
        [*STACK, "up", "--python", sys.executable], env=env, capture_output=True, text=True, timeout=600
    )
    try:
        assert up.returncode == 0, up.stderr[-4000:]
        exports = subprocess.run([*STACK, "env"], capture_output=True, text=True, check=True).stdout
        port = next(line.split("=", 1)[1] for line in exports.splitlines() if "AIRFLOW__API__PORT" in line)
        url = f"http://127.0.0.1:{port.strip(chr(39))}"
        password, token = admin_login(url, home)
        if hide_jdks_prefix():  # no JDK on disk, as each Airflow service sees the disk
            airflow = {name: pid for name, pid in stack_processes(home).items() if name != "postgres"}
            seen = {name: os.listdir(f"/proc/{pid}/root/usr/lib/jvm") for name, pid in airflow.items()}
            assert seen and not any(seen.values()), seen
        yield Stack(url=url, user="admin", password=password, token=token)
    finally:
        pids = list(stack_processes(home).values())
        subprocess.run([*STACK, "down"], capture_output=True, text=True, timeout=300)
        left = [pid for pid in pids if _alive(pid)]
        assert not left, f"the Airflow stack left processes behind: {left}"
        # The stack ran with no JDK visible and a tripwire java first on PATH (airflow_stack.without_java).
        assert_no_java_started({JAVA_TRIPWIRE_ENV: str(home / "no-java")})


@pytest.fixture(scope="session")
def shots_dir() -> Path:
    path = REPO / "test-artifacts" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots go to {path}")
    return path


@pytest.fixture
def page(airflow_stack: Stack) -> Iterator[Any]:
    """A logged-in Chromium page (Debian's chromium: browser downloads do not work here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{airflow_stack.url}/")
        page.get_by_label("Username").fill(airflow_stack.user)
        page.get_by_label("Password").fill(airflow_stack.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{airflow_stack.url}/")
        yield page
        browser.close()
