"""The README's "Trying it in the Airflow UI" commands, run exactly as the README writes them.

The browser tests start the stack through ``airflow_stack.py`` with an absolute
interpreter, so they passed while ``make airflow-up`` (a relative one) crashed
for every new user. This test reads the commands out of the README block and
runs each line through bash in the checkout, as a user pastes them, and between
``up`` and ``down`` checks what the README promises: the UI's URL answers, the
services report healthy, and ``admin`` with the password from the file named
there can use the REST API.

It shares ports and state with the ``airflow_stack`` fixture, so it runs before
any test that uses the fixture (``conftest.py`` orders it first) and refuses to
start while a stack is already answering.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests._docs import commands, move_ports, shell_block
from tests._util import wait_until
from tests.e2e._support import admin_login

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
SECTION = "Trying it in the Airflow UI"
SERVICES = ("metadatabase", "scheduler", "triggerer", "dag_processor")


def readme_block() -> str:
    """The bash block of the README's Airflow UI section."""
    return shell_block("README.md", SECTION).text


def ui_url(block: str) -> str:
    """The UI address the README gives, moved to this session's port base if it is not the default."""
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", block)
    assert found, f"the README block names no UI address:\n{block}"
    return f"http://127.0.0.1:{move_ports(found.group(1))}"


def run_line(line: str) -> subprocess.CompletedProcess[str]:
    # The README's line verbatim: bash parses it (and drops its trailing comment) as a user's shell would.
    return subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=900)


# Generous: on a CI machine at load 15 the API server has taken over 10 s to answer its first
# request. What the test proves is that it answers, not how fast.
REQUEST_TIMEOUT = 60


def get(url: str, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=REQUEST_TIMEOUT) as resp:
        return json.load(resp)


def statuses(url: str) -> dict[str, str]:
    health = get(f"{url}/api/v2/monitor/health")
    return {name: health.get(name, {}).get("status") for name in SERVICES}


def answering(url: str) -> bool:
    try:
        get(f"{url}/api/v2/monitor/health")
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return True


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_readme_airflow_ui_commands_work_as_written(cluster) -> None:
    block = readme_block()
    lines = commands(block)
    assert lines and lines[0].split("#")[0].split() == ["make", "airflow-up"], lines
    assert lines[-1].split("#")[0].split() == ["make", "airflow-down"], lines
    url = ui_url(block)
    assert not answering(url), f"an Airflow stack already answers on {url}; stop it before this test"
    home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster")) / "airflow-stack"
    password_file = re.search(r"password in (\S+)", block)
    assert password_file and password_file.group(1).endswith("airflow-stack/passwords.json"), block
    started: list[int] = []
    try:
        for line in lines[:-1]:
            done = run_line(line)
            assert done.returncode == 0, f"`{line}` failed ({done.returncode}):\n{done.stderr[-4000:]}"
        started = [int(p.read_text()) for p in (home / "run").glob("*.pid")]
        postmaster = home / "pgdata" / "postmaster.pid"
        if postmaster.exists():
            started.append(int(postmaster.read_text().split()[0]))
        # The REST health check, against the address the README gives.
        # A heartbeat late under load reads "unhealthy" for a moment: wait for all four, bounded.
        healthy = dict.fromkeys(SERVICES, "healthy")
        wait_until(lambda: statuses(url) == healthy, 120, "every service to report healthy")
        # The README's login: user admin, password from the file it names.
        _, token = admin_login(url, home)
        dags = wait_until(
            lambda: (
                {d["dag_id"] for d in get(f"{url}/api/v2/dags?limit=100", token)["dags"]}
                >= {"tony_nightly_retrain", "tony_train_on_demand"}
            ),
            180,
            "the example DAGs to be parsed",
        )
        assert dags is True
    finally:
        down = run_line(lines[-1])
    assert down.returncode == 0, f"`{lines[-1]}` failed ({down.returncode}):\n{down.stderr[-4000:]}"
    assert started, "make airflow-up left no process ids to check"
    assert not [pid for pid in started if alive(pid)], f"make airflow-down left processes: {started}"
    assert not answering(url), f"the API still answers on {url} after make airflow-down"
