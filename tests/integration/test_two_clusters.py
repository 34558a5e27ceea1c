"""One process (a triggerer) follows jobs on two ``tony_yarn`` connections, each on its own cluster.

The second cluster is a second local Hadoop (its own HDFS and YARN) on the open
cluster's port base + 800, sharing the first one's jar cache; it is started here when it is not up
yet and stopped afterwards in that case. Each connection names its own Hadoop
conf dir, ``yarn`` and skein credentials folder; nothing is set process-wide,
so the two skein drivers must each start against their own cluster although
skein read ``SKEIN_CONFIG`` once, at import.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._cluster import SECOND_PORT_BASE
from tests._util import rm_apps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = REPO / "devcluster" / "devcluster.py"
BEHAVE = str(Path(__file__).resolve().parent / "jobs" / "behave.py")


def _exports(text: str) -> dict[str, str]:
    import shlex

    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line and not line.startswith("export PATH="):
            name, _, value = line[len("export ") :].partition("=")
            env[name] = shlex.split(value)[0]
    return env


@pytest.fixture(scope="module")
def second_cluster(cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = Path(os.environ.get("TONY_SECOND_DEVCLUSTER_HOME", REPO / ".devcluster-second"))
    env = {
        **os.environ,
        "TONY_DEVCLUSTER_HOME": str(home),
        "TONY_DEVCLUSTER_PORT_BASE": SECOND_PORT_BASE,
        "TONY_DEVCLUSTER_JARS": str(Path(cluster.home) / "jars"),
        "TONY_DEVCLUSTER_NM_MEMORY_MB": "4096",
        "TONY_DEVCLUSTER_NM_VCORES": "4",
    }
    status = subprocess.run([sys.executable, str(DEVCLUSTER), "status"], env=env, capture_output=True, text=True)
    was_up = status.returncode == 0
    if not was_up:
        up = subprocess.run(
            [sys.executable, str(DEVCLUSTER), "up"], env=env, capture_output=True, text=True, timeout=900
        )
        assert up.returncode == 0, up.stderr[-4000:]
    exported = subprocess.run(
        [sys.executable, str(DEVCLUSTER), "env"], env=env, capture_output=True, text=True, check=True
    ).stdout
    yield {**_exports(exported), "bin": str(home / "bin")}
    if not was_up:
        subprocess.run([sys.executable, str(DEVCLUSTER), "down"], env=env, capture_output=True, timeout=300)


def connection(env: dict[str, str], bin_dir: str, skein_dir: Path) -> str:
    return json.dumps(
        {
            "conn_type": "tony_yarn",
            "extra": {
                "hadoop_conf_dir": env["HADOOP_CONF_DIR"],
                "yarn_bin_dir": bin_dir,
                "skein_config": str(skein_dir),
                "java_home": env["JAVA_HOME"],
                "webhdfs_url": env["TONY_WEBHDFS_URL"],
                "webhdfs_user": env["TONY_WEBHDFS_USER"],
                "base_path": f"/user/{env['TONY_WEBHDFS_USER']}/tony",
            },
        }
    )


def rm_knows(rm_url: str, app_id: str) -> bool:
    try:
        with urllib.request.urlopen(f"{rm_url}/ws/v1/cluster/apps/{app_id}", timeout=10) as resp:
            return json.load(resp)["app"]["id"] == app_id
    except OSError:
        return False


def test_a_triggerer_follows_jobs_on_two_connections_each_on_its_own_cluster(
    cluster, second_cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_tony.hooks.yarn import YarnHook
    from airflow_provider_tony.runtime.spec import JobSpec
    from airflow_provider_tony.triggers.tony import TonyTrigger

    skein_before = os.environ.get("SKEIN_CONFIG")
    monkeypatch.setenv("AIRFLOW_CONN_TONY_A", connection(cluster.env, str(cluster.home / "bin"), tmp_path / "skein-a"))
    monkeypatch.setenv("AIRFLOW_CONN_TONY_B", connection(second_cluster, second_cluster["bin"], tmp_path / "skein-b"))
    tag = f"pytest-{uuid.uuid4().hex[:12]}"
    spec = JobSpec.from_dict(
        {
            "name": "pytest-two-clusters",
            "tags": [tag],
            "roles": {"worker": {"memory": "256 MiB", "script": BEHAVE, "args": ["ok"]}},
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,
        }
    )
    hooks = {conn: YarnHook(conn) for conn in ("tony_a", "tony_b")}
    apps: dict[str, str] = {}
    try:
        for conn, hook in hooks.items():
            apps[conn] = hook.submit(spec, attempt=1)
        rms = {"tony_a": cluster.rm_url, "tony_b": second_cluster["TONY_RM_URL"]}
        assert rms["tony_a"] != rms["tony_b"]
        for conn, app_id in apps.items():
            other = "tony_b" if conn == "tony_a" else "tony_a"
            assert rm_knows(rms[conn], app_id), f"{conn}'s job must be on {rms[conn]}"
            assert not rm_knows(rms[other], app_id) or apps[other] == app_id, f"{app_id} leaked to {rms[other]}"

        async def follow_both() -> list[dict[str, Any]]:
            triggers = [
                TonyTrigger(
                    app_id=app_id, yarn_conn_id=conn, poll_interval=1.0, startup_timeout=300, am_stale_timeout=120
                )
                for conn, app_id in apps.items()
            ]

            async def first_event(trigger: TonyTrigger) -> dict[str, Any]:
                async for event in trigger.run():
                    return dict(event.payload)
                raise AssertionError(f"{trigger.yarn_conn_id}: the trigger ended without an event")

            return await asyncio.wait_for(asyncio.gather(*(first_event(t) for t in triggers)), 600)

        events = asyncio.run(follow_both())
        assert [e["status"] for e in events] == ["done", "done"], events
        assert [e["app_id"] for e in events] == list(apps.values())
        assert [e["result"]["final_status"] for e in events] == ["SUCCEEDED", "SUCCEEDED"], events
        # Each connection's credentials in its own folder; the process's SKEIN_CONFIG untouched.
        assert (tmp_path / "skein-a" / "skein.crt").is_file() and (tmp_path / "skein-b" / "skein.crt").is_file()
        assert os.environ.get("SKEIN_CONFIG") == skein_before
    finally:
        for conn, hook in hooks.items():
            for app in rm_apps(
                {"tony_a": cluster.rm_url, "tony_b": second_cluster["TONY_RM_URL"]}[conn],
                states="NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING",
                tag=tag,
            ):
                hook.kill(app["id"])
            hook.close()
