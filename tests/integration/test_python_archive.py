"""A job whose Python environment is a venv-pack archive, shipped through HDFS once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.spec import JobSpec

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BEHAVE = str(Path(__file__).parent / "jobs" / "behave.py")


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small venv with only what the runtime needs (skein, hdfs): no TensorFlow."""
    root = tmp_path_factory.mktemp("packed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "skein", "hdfs", "pyyaml"], check=True)
    archive = root / "env.tar.gz"
    subprocess.run(
        [str(Path(sys.executable).parent / "venv-pack"), "-p", str(venv), "-o", str(archive), "-q"], check=True
    )
    return archive


def test_job_runs_in_a_packed_environment(tony_client, app_tag, packed_env: Path) -> None:
    spec = JobSpec.from_dict(
        {
            "name": "pytest-venv-pack",
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": BEHAVE, "args": ["ok"]}},
            "python": {"archive": str(packed_env)},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,
        }
    )
    staged = tony_client.stage_archive(str(packed_env))
    remote = staged.split("://", 1)[1].split("/", 1)[1]
    hdfs = tony_client.hdfs()
    first = hdfs.status("/" + remote)["modificationTime"]

    result = tony_client.wait(tony_client.submit(spec, extra_tags=[app_tag]), poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    prefix = result.am_state.tasks["worker:0"].progress.metrics["prefix"]
    assert prefix.endswith("/environment"), f"the task did not run in the shipped environment: {prefix}"

    assert tony_client.stage_archive(str(packed_env)) == staged
    assert hdfs.status("/" + remote)["modificationTime"] == first, "an unchanged archive was uploaded again"
