"""An asset watcher on HDFS in the real Airflow stack: data written outside Airflow starts one run.

``tony_retrain_on_landing``'s asset is watched by ``HdfsPartitionTrigger`` in the stack's
triggerer. A partition written straight to HDFS (no Airflow task, as a Spark job would)
makes exactly one run whose triggering event names it; a second one landing while the
triggerer is down makes one more run once it is back, and the first one none. The runs are marked failed as
soon as they are seen (what they train is the nightly DAG's business, proven elsewhere) and
their applications killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._util import rm_apps, wait_until
from tests.e2e._support import stack_home

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e]
DAG = "tony_retrain_on_landing"
REPO = Path(__file__).resolve().parents[2]
STACK = [sys.executable, str(REPO / "devcluster" / "airflow_stack.py")]


#: What a triggerer logs as it starts: the log's own marker between one process and the next.
STARTING = "Starting the triggerer"


def _log() -> list[str]:
    log = stack_home() / "logs" / "triggerer.log"
    return (log.read_text(errors="replace") if log.exists() else "").splitlines()


def triggerer_starts() -> int:
    """How many triggerers have started in this home so far (every stack appends to one log)."""
    return sum(STARTING in line for line in _log())


def triggerer_lines(needle: str, *, after_start: int = 0) -> int:
    """Lines of the triggerer's log holding ``needle``, after its ``after_start``-th start (0: all).

    Told apart by the log's own start lines, not by clocks: a process's start time
    (psutil, from the boot time) and the log's stamps (the wall clock) once disagreed
    by more than the seconds between a start and its first line, and the test missed it.
    """
    starts, count = 0, 0
    for line in _log():
        starts += STARTING in line
        if needle in line and starts >= after_start:
            count += 1
    return count


def runs(stack: Any) -> list[dict[str, Any]]:
    return stack.api("GET", f"/dags/{DAG}/dagRuns?order_by=-id&limit=100")["dag_runs"]


def partitions_of(stack: Any, run_id: str) -> list[str]:
    events = stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/upstreamAssetEvents")["asset_events"]
    return [str((e.get("extra") or {}).get("payload", {}).get("partition")) for e in events]


@pytest.fixture
def landed_apps(airflow_stack, cluster) -> Iterator[None]:
    """The runs' applications killed at the end, whatever happened."""
    yield
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        for app in rm_apps(cluster.rm_url, states="NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING", tag=f"tony-dag:{DAG}"):
            client.kill(app["id"])


def test_a_partition_written_straight_to_hdfs_starts_one_run_also_across_a_triggerer_restart(
    airflow_stack, cluster, landed_apps
) -> None:
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        base, hdfs = client.base_path, client.hdfs()
    watched = "data/digits-landed/dt=*"  # as the DAG gives it: relative to the connection's base_path
    tag = uuid.uuid4().hex[:8]
    first, second = (f"{base}/data/digits-landed/dt=e2e-{tag}-{i}" for i in (1, 2))

    def land(partition: str) -> None:
        """What an upstream job does: the data, then ``_SUCCESS`` last."""
        hdfs.write(f"{partition}/train/part-00000.tfrecord", data=b"not read by this test", overwrite=True)
        hdfs.write(f"{partition}/_SUCCESS", data=b"", overwrite=True)

    def run_for(partition: str, before: set[str]) -> dict[str, Any]:
        found = wait_until(
            lambda: [r for r in runs(airflow_stack) if r["dag_run_id"] not in before], 180, f"a run for {partition}"
        )
        assert len(found) == 1, found
        run = found[0]
        assert partitions_of(airflow_stack, run["dag_run_id"]) == [partition]
        airflow_stack.api("PATCH", f"/dags/{DAG}/dagRuns/{run['dag_run_id']}", {"state": "failed"})
        return run

    try:
        started = wait_until(triggerer_starts, 180, "the triggerer to log its start")
        looked = f"watching {watched}:"
        wait_until(lambda: triggerer_lines(looked, after_start=started), 180, "the watcher's first look")
        before = {r["dag_run_id"] for r in runs(airflow_stack)}
        land(first)
        one = run_for(first, before)

        # Restart the triggerer: stop it, and let the stack start it again (up starts what is missing).
        pid = int((stack_home() / "run" / "triggerer.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), 120, "the triggerer to stop")
        # Data lands while no triggerer runs: the restarted watcher must still fire it (its memory is
        # Airflow's asset state store; one starting afresh would take it for what was already there).
        land(second)
        env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}  # as the session fixture started it
        up = subprocess.run(
            [*STACK, "up", "--python", sys.executable], env=env, capture_output=True, text=True, timeout=600
        )
        assert up.returncode == 0, up.stderr[-3000:]
        wait_until(
            lambda: triggerer_lines(looked, after_start=started + 1),
            180,
            "the restarted watcher's first look",
        )
        assert triggerer_lines(f"new partition {first}") == 1, "the restarted watcher did not fire it again"
        two = run_for(second, before | {one["dag_run_id"]})
        assert triggerer_lines(f"new partition {first}") == 1 and triggerer_lines(f"new partition {second}") == 1
        assert len([r for r in runs(airflow_stack) if r["dag_run_id"] not in before]) == 2, "two partitions, two runs"
        assert two["dag_run_id"] != one["dag_run_id"]
    finally:
        hdfs.delete(first, recursive=True)
        hdfs.delete(second, recursive=True)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
