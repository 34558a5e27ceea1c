"""The ``tony`` command on the real local cluster: submit, status, logs, validate --cluster.

The command runs as a subprocess (``python -m airflow_provider_tony``, the same
``main`` as the ``tony`` script), so this is what a person at a terminal gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._util import hide_jdks_prefix, wait_until
from tests.integration._cli import BEHAVE, submit_detached_then_kill, tony, write_job

pytestmark = pytest.mark.cluster


def test_submit_follows_to_success_then_status_and_logs(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe)
    submitted = tony("submit", str(job), "--poll-interval", "0.5")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    app_id = submitted.stdout.splitlines()[0]
    assert app_id.startswith("application_")
    assert f"{app_id} SUCCEEDED" in submitted.stdout

    status = tony("status", app_id)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)  # the AM is gone: YARN's report
    assert (report["app_id"], report["final_status"]) == (app_id, "SUCCEEDED")
    assert app_tag in report["tags"]

    # Right after the end, a NodeManager may not list the finished container's logs yet.
    def worker_log() -> subprocess.CompletedProcess[str] | None:
        logs = tony("logs", app_id, "--file", "worker.log")
        return logs if logs.returncode == 0 and "worker.log" in logs.stdout else None

    logs = wait_until(worker_log, 60, "tony logs to print the finished worker's log")
    assert "==== " in logs.stdout


def test_submit_of_a_failing_job_exits_1(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe, args=["exit", "--code", "3"])
    submitted = tony("submit", str(job), "--poll-interval", "0.5")
    assert submitted.returncode == 1, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert "exited with code 3" in submitted.stdout


def test_validate_against_the_cluster_names_the_limit(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe, memory="4 TiB")
    offline = tony("validate", str(job))
    assert offline.returncode == 0, offline.stderr  # the model allows it; only the cluster knows its limit
    checked = tony("validate", str(job), "--cluster")
    assert checked.returncode == 2
    assert "roles.worker.memory" in checked.stderr and "maximum-allocation-mb" in checked.stderr


SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
DIGITS = Path(__file__).resolve().parents[2] / "dags" / "training" / "digits_mwms.py"


def test_submit_with_a_tensorboard_role_and_no_checkpoint_dir_shows_scalars(
    tmp_path: Path, app_tag: str, python_exe: str, tony_client
) -> None:
    """`tony submit` of a JobSpec with a tensorboard role and no checkpoint.dir: TensorBoard, opened
    in Chromium through the RM's proxy, draws the run's scalars while it trains (it showed "No
    dashboards are active" for the whole run when events travelled only beside checkpoints)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    doc = {
        "name": "pytest-cli-tensorboard",
        "tags": [app_tag],
        "python": {"interpreter": python_exe},
        "roles": {
            "worker": {
                "memory": "1 GiB",
                "script": str(DIGITS),
                "args": ["--epochs", "3", "--steps-per-epoch", "10", "--linger", "120"],
            },
            "tensorboard": {"memory": "1 GiB", "module": "airflow_provider_tony.runtime.tensorboard"},
        },
        "heartbeat_timeout": 60,
    }
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(doc))
    submitted = tony("submit", str(job), "--detach")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    app_id = submitted.stdout.split()[0]
    try:
        url = wait_until(
            lambda: tony_client.tensorboard_url(app_id, tony_client.am_state(app_id)), 180, "TensorBoard to run"
        )
        assert url == f"{tony_client.rm_url}/proxy/{app_id}/pages/tensorboard/"
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1300, "height": 900})
                refused = []  # YARN's proxy answers POST with 405: TensorBoard must ask with GET
                page.on("response", lambda r: r.status == 405 and refused.append(r.url))

                curve = "tf-scalar-card:has-text('epoch_loss') path.line"

                def drawn() -> int:
                    try:  # TensorBoard starts, then reloads its logdir every 5 s: look until the loss curve draws
                        page.goto(url)  # the link as people get it: no query, no #dashboard
                        page.wait_for_selector(curve, timeout=20_000)
                    except Exception:  # noqa: BLE001 - not there yet
                        return 0
                    lines = page.locator(curve)  # an SVG path through at least two epochs' points
                    return sum("L" in (lines.nth(i).get_attribute("d") or "") for i in range(lines.count()))

                wait_until(drawn, 180, "the epoch_loss curve drawn by TensorBoard through the RM's proxy")
                assert page.url.endswith("?tensorboardColab=true#scalars"), page.url  # its GET-only Scalars view
                assert not refused, refused
                page.screenshot(path=str(SHOTS / "tensorboard-scalars.png"), full_page=True)
            finally:
                browser.close()
        # The events travelled through the default folder: <base_path>/tensorboard/<application id>.
        assert tony_client.hdfs().list(f"{tony_client.events_dir}/{app_id}")
    finally:
        tony_client.kill(app_id)
        tony_client.hdfs().delete(f"{tony_client.events_dir}/{app_id}", recursive=True)


def test_the_cli_sees_no_jdk_on_disk() -> None:
    """What tony() runs in: /usr/lib/jvm (every JDK of this machine) empty, so no java can start."""
    prefix = hide_jdks_prefix()
    if not prefix:
        pytest.skip("this kernel refuses a private mount: only the PATH tripwire hides the JDK")
    probe = "echo ran; ls -A /usr/lib/jvm; java -version"
    out = subprocess.run([*prefix, "sh", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.stdout == "ran\n" and out.returncode != 0, out.stdout + out.stderr


def test_submit_detached_then_kill_with_no_jdk(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    submit_detached_then_kill(tmp_path, app_tag, python_exe)


def test_gc_removes_the_staging_folders_of_ended_applications_only(cluster, tmp_path: Path, app_tag: str) -> None:
    """``tony gc`` on the real HDFS and RM: ``~/.skein/<app>`` of a killed application (planted again after
    the kill removed it) goes, one the RM does not know goes only when older than ``--max-age-days``,
    and anything not named like an application stays."""
    import time
    import uuid

    from airflow_provider_tony.yarn.client import TonyClient

    killed = submit_detached_then_kill(tmp_path, app_tag, sys.executable)
    cluster_ts = killed.split("_")[1]
    unknown_old, unknown_new = f"application_{cluster_ts}_99998", f"application_{cluster_ts}_99999"
    other = f"pytest-gc-not-an-app-{uuid.uuid4().hex[:8]}"
    with TonyClient.from_env() as client:
        hdfs = client.hdfs()
        planted = {killed: True, unknown_old: True, unknown_new: False, other: False}  # name: removed?
        try:
            for name in planted:
                hdfs.write(f".skein/{name}/.skein.sh", data=b"true", overwrite=True)
            old_ms = int((time.time() - 40 * 86400) * 1000)
            hdfs.set_times(f".skein/{unknown_old}", access_time=old_ms, modification_time=old_ms)
            dry = tony(
                "gc",
                "--base-path",
                f"/tmp/pytest-gc-empty-{uuid.uuid4().hex[:8]}",
                "--max-age-days",
                "30",
                "--dry-run",
                timeout=120,
            )
            assert dry.returncode == 0, dry.stdout + dry.stderr
            assert f"would remove ~/.skein/{killed}: the application is killed" in dry.stdout, dry.stdout
            assert all(hdfs.status(f".skein/{n}", strict=False) for n in planted), "a dry run removes nothing"
            done = tony(
                "gc", "--base-path", f"/tmp/pytest-gc-empty-{uuid.uuid4().hex[:8]}", "--max-age-days", "30", timeout=120
            )
            assert done.returncode == 0, done.stdout + done.stderr
            for name, removed in planted.items():
                assert (hdfs.status(f".skein/{name}", strict=False) is None) == removed, (name, done.stdout)
        finally:
            for name in planted:
                hdfs.delete(f".skein/{name}", recursive=True)


def test_gc_removes_planted_old_runs_and_nothing_else(cluster, tmp_path: Path) -> None:
    """``tony gc`` on the real HDFS: old runs planted with old times (WebHDFS SETTIMES) under a
    base path of this test's own; the dry run lists them and removes nothing, the real run removes
    exactly them; the newest run, a recent one and a folder holding a published model stay."""
    import time
    import uuid

    from hdfs import InsecureClient

    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    root = f"/user/{cluster.user}/pytest-gc-{uuid.uuid4().hex[:10]}"
    base = f"{root}/tony"
    runs = f"{base}/checkpoints/nightly/train"
    old_ms = int((time.time() - 40 * 86400) * 1000)
    planted = {
        f"{runs}/old/ckpt-000000000010/tony-manifest.json": True,  # path: removed?
        f"{runs}/recent/ckpt-000000000010/tony-manifest.json": False,
        f"{runs}/newest/ckpt-000000000020/tony-manifest.json": False,
        f"{runs}/newest/ckpt-000000000010.damaged-1-0-7/ckpt-10.index": True,
        f"{runs}/with-model/model/tony-model.json": False,
        f"{base}/history/application_1_0001.json": True,
        f"{base}/src/0123456789abcdef01234567.tar.gz": True,
        f"{base}/envs/fedcba9876543210fedcba98.tar.gz": False,
    }
    try:
        for path in planted:
            hdfs.write(path, data=b"{}", overwrite=True)
        aged = [p for p, gone in planted.items() if gone and not p.startswith(runs)]
        aged += [f"{runs}/old", f"{runs}/with-model", f"{runs}/newest/ckpt-000000000010.damaged-1-0-7"]
        for path in aged:
            hdfs.set_times(path, access_time=old_ms, modification_time=old_ms)
        expected = {f"{runs}/old", f"{runs}/newest/ckpt-000000000010.damaged-1-0-7"}
        expected |= {p for p, gone in planted.items() if gone and not p.startswith(runs)}

        def listed(*extra: str) -> set[str]:
            out = tony("gc", "--base-path", base, "--max-age-days", "30", *extra, timeout=120)
            assert out.returncode == 0, out.stdout + out.stderr
            lines = [line for line in out.stdout.splitlines() if "~/.skein/" not in line]  # staging: the test below
            words = [line.split() for line in lines]
            found = {w[2] for w in words if w[:2] == ["would", "remove"]}
            found |= {w[1] for w in words if w[:1] == ["removing"]}
            paths = {path.rstrip(":") for path in found}
            assert paths <= expected, paths - expected  # a run that would remove more fails at once
            return paths

        # Other lanes' jobs share the cluster: one starting or ending has no readable references for a
        # moment, and gc then keeps every staged file (what cannot be proven unused stays). So each run
        # is repeated, bounded, until no such job is in the way; listing anything beyond them fails at once.
        wait_until(lambda: listed("--dry-run") == expected, 300, "a dry run listing exactly the old runs")
        assert all(hdfs.status(p, strict=False) for p in planted), "a dry run removes nothing"

        def all_gone() -> bool:
            listed()
            return all(hdfs.status(path, strict=False) is None for path in expected)

        wait_until(all_gone, 300, "gc to remove exactly the old runs")
        for path, gone in planted.items():
            if not gone and not path.startswith(f"{runs}/newest/ckpt-000000000010.damaged"):
                assert hdfs.status(path, strict=False) is not None, f"{path} must stay"
    finally:
        hdfs.delete(root, recursive=True)


def test_gc_keeps_the_staged_files_a_running_job_localises(cluster, app_tag: str, python_exe: str) -> None:
    """``tony gc`` while a job runs: its staged files, aged past ``--max-age-days`` (WebHDFS SETTIMES)
    once its containers have localised them, stay, since a container restarted on another node
    localises them again; an aged file nobody names goes. The job stages under a base path of this
    test's own, so aging its upload cache touches no other job's files."""
    import time
    import uuid

    import httpx

    from airflow_provider_tony import retention
    from airflow_provider_tony.runtime.spec import JobSpec
    from airflow_provider_tony.yarn.client import TonyClient

    root = f"/user/{cluster.user}/pytest-gc-{uuid.uuid4().hex[:10]}"
    base = f"{root}/tony"
    spec = JobSpec.from_dict(
        {
            "name": "pytest-gc-running",
            "tags": [app_tag],
            "python": {"interpreter": python_exe},
            "roles": {"worker": {"memory": "256 MiB", "script": str(BEHAVE), "args": ["sleep", "--seconds", "600"]}},
        }
    )
    with TonyClient(rm_url=cluster.rm_url, webhdfs_url=cluster.webhdfs_url, base_path=base) as client:
        hdfs = client.webhdfs
        app_id = client.submit(spec)
        try:

            def localised() -> bool:  # the AM and the worker running: both localised what they need
                app = httpx.get(f"{cluster.rm_url}/ws/v1/cluster/apps/{app_id}", timeout=10).json()["app"]
                return app["state"] == "RUNNING" and int(app.get("runningContainers") or 0) >= 2

            wait_until(localised, 180, f"{app_id} running with its worker")
            named = retention.read_references(hdfs, hdfs.resolve(f".skein/{app_id}"))
            assert named, "the submit wrote what the job localises"
            staged = sorted(p for p in named if p.startswith(f"{base}/cache/"))
            assert staged, named
            stray = f"{base}/cache/pytest-stray.zip"
            client.hdfs().write(stray, data=b"x")
            old_ms = int((time.time() - 40 * 86400) * 1000)
            for path in [*staged, stray]:
                client.hdfs().set_times(path, access_time=old_ms, modification_time=old_ms)
            done = tony("gc", "--base-path", base, "--max-age-days", "30", timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            assert f"removing {stray}" in done.stdout, done.stdout
            assert hdfs.status(stray, strict=False) is None
            for path in staged:
                assert hdfs.status(path, strict=False) is not None, f"{path}: the running job localises it"
            assert client.report(app_id).state == "RUNNING"
        finally:
            client.kill(app_id)
            client.hdfs().delete(root, recursive=True)
