"""The tony command as the integration suites run it: with no JDK anywhere (``tony()``), on a job file of its own.

Shared by test_cli.py and test_secure.py (which runs submit-and-kill again on the Kerberized cluster).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from tests._util import run_tony_without_jdk, wait_until

BEHAVE = Path(__file__).parent / "jobs" / "behave.py"


NO_JAVA = Path(tempfile.mkdtemp(prefix="tony-no-java-"))


def tony(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The command with no JDK visible (no JAVA_HOME, no java on PATH, /usr/lib/jvm empty): it must need none."""
    return run_tony_without_jdk(*args, tripwire_dir=NO_JAVA, timeout=timeout)  # type: ignore[no-any-return]


def write_job(tmp_path: Path, tag: str, python: str, **role: object) -> Path:
    # A relative script beside the YAML: the CLI resolves it against the file's folder.
    (tmp_path / "behave.py").write_text(BEHAVE.read_text())
    doc = {
        "name": "pytest-cli",
        "tags": [tag],
        "python": {"interpreter": python},
        "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": "behave.py", "args": ["ok"], **role}},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 10,
        "registration_timeout": 120,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def submit_detached_then_kill(tmp_path: Path, tag: str, python: str) -> str:
    """``tony submit --detach`` then ``tony kill``: both over the RM's REST API, with no java anywhere (tony()).

    The kill removes the application's staging folder (``~/.skein/<app>``): a killed
    AM never does. test_secure runs it again on the Kerberized cluster. Returns the
    killed application's id."""
    job = write_job(tmp_path, tag, python, args=["sleep", "--seconds", "600"])
    submitted = tony("submit", str(job), "--detach")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    app_id = submitted.stdout.split()[0]
    assert app_id.startswith("application_")
    killed = tony("kill", app_id)
    assert killed.returncode == 0, killed.stderr
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        report = wait_until(lambda: (r := client.report(app_id)).state == "KILLED" and r, 120, f"{app_id} killed")
        assert report.final_status == "KILLED"
        assert client.hdfs().status(f".skein/{app_id}", strict=False) is None, "the staging folder outlived the kill"
    return app_id
