"""A job whose Python environment is a venv-pack archive, shipped through HDFS once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import rm_app

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BEHAVE = str(Path(__file__).parent / "jobs" / "behave.py")
PTH_MARKER = "tony-test: the archive's .pth ran"


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small venv with only what the runtime needs (skein, hdfs): no TensorFlow."""
    root = tmp_path_factory.mktemp("packed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "skein", "hdfs", "pyyaml"], check=True)
    # A .pth file runs at every start of the archive's Python (isolated mode too): what a hostile
    # archive could do in the AM beside the keytab, unless the AM has a Python of its own.
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "zz_tony_marker.pth").write_text(f"import sys; sys.stderr.write({PTH_MARKER!r} + chr(10))\n")
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


def test_an_am_interpreter_keeps_the_archives_code_out_of_the_am(tony_client, app_tag, packed_env: Path) -> None:
    """``python.am_interpreter`` (issue 35, point 1, for archive jobs): the AM starts with a node's Python
    and runs nothing of the archive, whose ``.pth`` file does run in the task (so it was live)."""
    spec = JobSpec.from_dict(
        {
            "name": "pytest-am-interpreter",
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": BEHAVE, "args": ["ok"]}},
            "python": {"archive": str(packed_env), "am_interpreter": sys.executable},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,
        }
    )
    result = tony_client.wait(tony_client.submit(spec, extra_tags=[app_tag]), poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    task = result.am_state.tasks["worker:0"]
    assert task.progress.metrics["prefix"].endswith("/environment"), task.progress.metrics
    worker_logs = tony_client.container_logs(task.container_id, task.host)
    assert any(PTH_MARKER in text for text in worker_logs.values()), worker_logs.keys()
    app = rm_app(os.environ["TONY_RM_URL"], result.app_id)
    am_container = app["amContainerLogs"].rstrip("/").split("/")[-2]
    am_logs = tony_client.container_logs(am_container, app["amHostHttpAddress"].rsplit(":", 1)[0])
    assert am_logs, f"no log of the AM's container {am_container}"
    assert not [name for name, text in am_logs.items() if PTH_MARKER in text], "the archive's code ran in the AM"
