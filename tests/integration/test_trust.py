"""Trust boundaries on the real cluster (issue 27): a hostile training script, another YARN
user's application carrying our tags, and another HDFS user's file in our upload cache.

The hostile script (jobs/hostile.py) runs through the real executor, AM, HTTP
follower and ``tony`` commands; before the fixes its 3000 metrics made the
executor's key-value put exceed skein's gRPC limit and the job failed as
``worker:0 lost``, and its control characters reached every log line.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import rm_app, rm_apps, wait_until

pytestmark = pytest.mark.cluster

JOBS = Path(__file__).parent / "jobs"
HOSTILE = str(JOBS / "hostile.py")


def _clean(line: str) -> bool:
    """One log line: printable (no newline, escape or bell) and no group marker (markup is plain text here)."""
    return line.isprintable() and "::group::" not in line and "::endgroup::" not in line


def test_a_hostile_script_crashes_neither_its_executor_nor_any_observer(
    tony_client, python_exe: str, app_tag: str
) -> None:
    spec = JobSpec.from_dict(
        {
            "name": "pytest-hostile",
            "tags": [app_tag],
            "python": {"interpreter": python_exe},
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": HOSTILE, "args": ["30"]}},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,  # shorter than the storm: before, the failing puts made worker:0 lost
            "registration_timeout": 120,
        }
    )
    app_id = tony_client.submit(spec)

    def reported() -> object:
        doc = tony_client.am_state(app_id)
        task = doc.task("worker:0") if doc is not None else None
        return doc if task is not None and task.progress is not None and task.progress.step == 7 else None

    wait_until(reported, 180, "worker:0's first report (step 7) in the AM's document")

    page = httpx.get(tony_client.job_page_url(app_id), timeout=20, follow_redirects=True)
    assert page.status_code == 200, page.text[:500]
    assert "default-src 'none'" in page.headers.get("content-security-policy", "")
    assert page.headers.get("x-content-type-options") == "nosniff"
    assert "<script>" not in page.text and "\x1b" not in page.text

    lines: list[str] = []
    result = tony_client.wait(app_id, poll_interval=0.5, startup_timeout=180, emit=lines.append)
    assert result.succeeded, result.diagnostics  # before: "[retryable] worker:0 lost"
    assert lines and all(_clean(line) for line in lines), [line for line in lines if not _clean(line)][:3]
    final = result.am_state
    assert final is not None and len(final.to_json()) < 256 << 10
    last = final.tasks["worker:0"].progress
    assert last is None or (last.step in (None, 3, 7) and len(last.metrics) <= 64)

    # `tony logs` of the same job: every line of the script's stderr shown escaped.
    def logs() -> subprocess.CompletedProcess[str] | None:
        done = subprocess.run(
            [sys.executable, "-m", "airflow_provider_tony", "logs", app_id, "--file", "worker.log"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done if done.returncode == 0 and "stderr loss" in done.stdout else None

    shown = wait_until(logs, 60, "tony logs to print the hostile worker's log")
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout and "\r" not in shown.stdout
    assert not any(line.startswith(("::group::", "::endgroup::")) for line in shown.stdout.splitlines())
    assert "stderr loss\\n::group::" not in shown.stdout or ": :group::" in shown.stdout


def _as_other_user(job: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_tony", "submit", str(job), "--detach"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.splitlines()[0]


def test_another_users_succeeded_application_with_our_tags_is_not_reattached(
    tony_client, cluster, python_exe: str, app_tag: str, tmp_path: Path
) -> None:
    """On the open profile the RM takes the user skein's driver names (HADOOP_USER_NAME)."""
    from airflow_provider_tony.yarn.client import TonyClient

    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": "pytest-squatter",
                "tags": [app_tag, "tony-dag:d", "tony-task:t", "tony-run:r"],
                "python": {"interpreter": python_exe},
                "roles": {"worker": {"instances": 1, "memory": "256 MiB", "command": ["true"]}},
                "heartbeat_interval": 0.5,
            }
        )
    )
    env = {**os.environ, **cluster.env, "HADOOP_USER_NAME": "mallory", "TONY_WEBHDFS_USER": "mallory"}
    squat = _as_other_user(job, env)
    wait_until(lambda: rm_app(cluster.rm_url, squat)["state"] == "FINISHED", 180, "the squatter's application to end")
    app = rm_app(cluster.rm_url, squat)
    assert (app["user"], app["finalStatus"]) == ("mallory", "SUCCEEDED")
    assert any(a["id"] == squat for a in rm_apps(cluster.rm_url, tag=app_tag))

    with TonyClient.from_env() as ours:
        assert ours.find_by_tags([app_tag, "tony-dag:d", "tony-task:t", "tony-run:r"], active_only=False) == []
        assert ours.yarn_user != "mallory"
        # The same tags on an application of our own user are found: the filter is the user, not the tags.
        mine = _as_other_user(job, {**os.environ, **cluster.env})
        wait_until(lambda: rm_app(cluster.rm_url, mine)["state"] == "FINISHED", 180, "our application to end")
        found = ours.find_by_tags([app_tag, "tony-run:r"], active_only=False)
        assert [a.app_id for a in found] == [mine]


def test_an_upload_planted_in_our_cache_by_another_hdfs_user_is_replaced(cluster, tmp_path: Path) -> None:
    """The local cluster runs with HDFS permissions off, so another user can write into our folders."""
    from hdfs import InsecureClient

    from airflow_provider_tony.yarn.client import TonyClient

    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(os.urandom(2048))
    with TonyClient.from_env() as ours:
        remote = f"{ours.base_path}/envs/{hashlib.sha256(archive.read_bytes()).hexdigest()[:24]}.tar.gz"
        ours.hdfs().makedirs(f"{ours.base_path}/envs")
        mallory = InsecureClient(cluster.webhdfs_url, user="mallory")
        mallory.write(remote, data=b"planted " * 256, overwrite=True)
        assert mallory.status(remote)["owner"] == "mallory"
        ours.stage_archive(str(archive))
        status = ours.hdfs().status(remote)
        assert status["owner"] != "mallory" and status["length"] == archive.stat().st_size
        with ours.hdfs().read(remote) as reader:
            assert reader.read() == archive.read_bytes()


HOSTILE_MODULE = """import os, sys
if "TONY_TASK_ID" not in os.environ:  # the AM or the executor (ours), not the job's own process
    sys.stderr.write("a job file ran in a process of the runtime\\n")
    os._exit(97)
"""
CHECK_FILES = """import os, sys
missing = [n for n in ("skein.py", "sitecustomize.py", "airflow_provider_tony.py") if not os.path.exists(n)]
sys.exit(5 if missing else 0)
"""


def test_job_files_named_like_our_modules_never_run_in_the_am_or_the_executor(
    tony_client, python_exe: str, app_tag: str, tmp_path: Path
) -> None:
    """Issue 35.1: ``skein.py``, ``sitecustomize.py`` and an ``airflow_provider_tony`` shadow in ``files:``.

    Each exits its process with 97 when imported outside the job's own process.
    Before, the AM (started with ``-m``, its working directory first on ``sys.path``
    and every job file linked there) imported the job's ``skein.py`` before any
    provider code, beside the keytab: the application failed. Now the AM is given
    none of them and both our processes start isolated; the job's script still
    finds them in its working directory.
    """
    files = {}
    for name in ("skein.py", "sitecustomize.py", "airflow_provider_tony.py"):
        (tmp_path / name).write_text(HOSTILE_MODULE)
        files[name] = str(tmp_path / name)
    script = tmp_path / "check_files.py"
    script.write_text(CHECK_FILES)
    spec = JobSpec.from_dict(
        {
            "name": "pytest-hostile-files",
            "tags": [app_tag],
            "python": {"interpreter": python_exe},
            "files": files,
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": str(script)}},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 30,
            "registration_timeout": 120,
        }
    )
    app_id = tony_client.submit(spec)
    result = tony_client.wait(app_id, poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    assert result.am_state is not None and result.am_state.tasks["worker:0"].exit_code == 0
    # Issue 35.7: the AM removes the application's staging folder at the end.
    wait_until(lambda: tony_client.report(app_id).state == "FINISHED", 120, f"{app_id} to finish")
    assert tony_client.hdfs().status(f".skein/{app_id}", strict=False) is None, "the staging folder was left"
