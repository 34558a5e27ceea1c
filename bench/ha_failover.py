"""How long the provider takes to get past an RM and a NameNode failover, beside Hadoop's own Java client.

    eval "$(TONY_DEVCLUSTER_HA=1 python3 devcluster/devcluster.py env)"   # the HA profile, up
    python bench/ha_failover.py [--rounds 2]

Each round, with one real job running (one worker counting steps, a checkpoint every 10 steps):

- **RM**: a thread asks the provider's client for the application's report every 0.2 s (what
  the operator's follow loop does). The active RM is SIGKILLed (from this process)
  and, at the same moment, Hadoop's Java client asks for the same report (``yarn application
  -status``: ``ApplicationCLI`` on the cluster's conf and jars, its failover proxy provider).
  Reported: from the kill to the provider's first report again, and how long the Java command
  took (its JVM's start-up, about 2 s here, included; ``java_start_s`` is that start alone).
- **NameNode**: the active NameNode is SIGKILLed; at that moment the runtime's WebHDFS client
  (``runtime/webhdfs_failover.py``, what the containers use) writes a small file, and Hadoop's
  ``hdfs dfs -put`` (``FsShell``) another. Reported: from the kill to each write's end, and to
  the job's next checkpoint on HDFS.

Writes ``bench/results/ha_failover.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
DEVCLUSTER = [sys.executable, str(REPO / "devcluster" / "devcluster.py")]
COUNT_STEPS = REPO / "tests" / "integration" / "jobs" / "count_steps.py"


def _dc(*args: str) -> str:
    proc = subprocess.run([*DEVCLUSTER, *args], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"devcluster {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip()


def _java(main_class: str, *args: str) -> subprocess.Popen[str]:
    home = Path(os.environ["TONY_DEVCLUSTER_HOME"])
    jars = Path(os.environ.get("TONY_DEVCLUSTER_JARS", home / "jars"))
    cmd = [
        str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"),
        "-Xmx256m",
        *_add_opens(),
        "-cp",
        f"{os.environ['HADOOP_CONF_DIR']}:{jars}/*",
        main_class,
        *args,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _add_opens() -> list[str]:
    """The flags Hadoop needs on Java 17 (devcluster's list, loaded from its file)."""
    sys.path.insert(0, str(REPO / "devcluster"))
    from dc_layout import ADD_OPENS  # type: ignore[import-not-found]

    return list(ADD_OPENS)


def _timed_java(main_class: str, *args: str) -> tuple[float, int]:
    began = time.monotonic()
    proc = _java(main_class, *args)
    proc.communicate(timeout=300)
    return time.monotonic() - began, proc.returncode


def _job(ckpt: str, steps: int) -> Any:
    from airflow_provider_tony.runtime.spec import JobSpec

    return JobSpec.from_dict(
        {
            "name": "bench-ha-failover",
            "roles": {
                "worker": {
                    "instances": 1,
                    "memory": "512 MiB",
                    "script": str(COUNT_STEPS),
                    "args": ["--steps", str(steps), "--every", "10", "--sleep", "0.2"],
                }
            },
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 1.0,
            "heartbeat_timeout": 60,
            "checkpoint": {"dir": ckpt, "poll_interval": 0.5, "keep": 100},
        }
    )


def _kill_active(kind: str) -> float:
    """SIGKILL the active RM (``rm``) or NameNode (``nn``) here and now; the moment it was sent."""
    ident = _dc("active", kind)
    name = f"resourcemanager-{ident}" if kind == "rm" else f"namenode-{ident}"
    pid = int((Path(os.environ["TONY_DEVCLUSTER_HOME"]) / "run" / f"{name}.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except Exception:  # noqa: BLE001 - a daemon may be failing over; look again
            got = None
        if got:
            return got
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def rm_round(client: Any, app_id: str) -> dict[str, float]:
    """Kill the active RM; the provider's next report and Java's ``yarn application -status``."""
    reports: list[float] = []
    stop = threading.Event()

    def follow() -> None:
        while not stop.is_set():
            try:
                client.report(app_id)
                reports.append(time.monotonic())
            except Exception:  # noqa: BLE001 - every candidate failing is what is being timed
                pass
            time.sleep(0.2)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    _wait(lambda: reports, 60, "a first report")
    killed = _kill_active("rm")
    java_s, java_rc = _timed_java("org.apache.hadoop.yarn.client.cli.ApplicationCLI", "application", "-status", app_id)
    _wait(lambda: any(t > killed + 0.5 for t in reports), 300, "a report after the RM failover")
    stop.set()
    thread.join(timeout=10)
    # The first report that began after the kill (a report in flight at the kill may still land).
    resumed = next(t for t in reports if t > killed + 0.5)
    _dc("up")  # the killed RM back, as standby
    return {"provider_report_s": resumed - killed, "java_status_s": java_s, "java_rc": float(java_rc)}


def nn_round(hdfs: Any, ckpt: str, tmp: Path) -> dict[str, float]:
    """Kill the active NameNode; the runtime client's write, Java's ``hdfs dfs -put``, the next checkpoint."""
    from airflow_provider_tony.runtime.checkpoint import remote_checkpoints

    before = remote_checkpoints(hdfs, ckpt)[-1]
    local = tmp / f"put-{uuid.uuid4().hex[:6]}"
    local.write_bytes(b"x" * 4096)
    target = f"/tmp/bench-ha-{uuid.uuid4().hex[:8]}"
    hdfs.makedirs(target)
    killed = _kill_active("nn")
    java: dict[str, float] = {}

    def put() -> None:
        seconds, rc = _timed_java("org.apache.hadoop.fs.FsShell", "-put", str(local), f"{target}/java")
        java.update(java_put_s=seconds, java_rc=float(rc))

    putter = threading.Thread(target=put, daemon=True)
    putter.start()
    hdfs.write(f"{target}/runtime", data=b"x" * 4096)
    runtime_s = time.monotonic() - killed
    _wait(lambda: remote_checkpoints(hdfs, ckpt)[-1] > before, 300, "a checkpoint after the NameNode failover")
    checkpoint_s = time.monotonic() - killed
    putter.join(timeout=300)
    hdfs.delete(target, recursive=True)
    _dc("up")  # the killed NameNode back, as standby
    return {"runtime_write_s": runtime_s, "next_checkpoint_s": checkpoint_s, **java}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if os.environ.get("TONY_DEVCLUSTER_HA") != "1":
        raise SystemExit('point this shell at the HA profile first: eval "$(TONY_DEVCLUSTER_HA=1 devcluster.py env)"')
    from airflow_provider_tony.runtime.webhdfs_failover import FailoverInsecureClient
    from airflow_provider_tony.yarn.client import TonyClient

    _dc("up")  # both RMs and both NameNodes, whatever an earlier run left
    java_start_s, _ = _timed_java("org.apache.hadoop.util.VersionInfo")
    hdfs = FailoverInsecureClient(os.environ["TONY_WEBHDFS_URL"], user=os.environ["TONY_WEBHDFS_USER"])
    ckpt = f"/tmp/bench-ha-ckpt-{uuid.uuid4().hex[:8]}"
    rounds: list[dict[str, float]] = []
    with TonyClient.from_env() as client, tempfile.TemporaryDirectory() as tmp:
        app_id = client.submit(_job(ckpt, steps=400 * args.rounds))
        try:
            from airflow_provider_tony.runtime.checkpoint import remote_checkpoints

            _wait(lambda: remote_checkpoints(hdfs, ckpt), 300, "the first checkpoint")
            for _ in range(args.rounds):
                rounds.append({**rm_round(client, app_id), **nn_round(hdfs, ckpt, Path(tmp))})
        finally:
            _dc("up")  # a round that stopped part way may have left one down
            client.kill(app_id)
            hdfs.delete(ckpt, recursive=True)
    keys = ["provider_report_s", "java_status_s", "runtime_write_s", "java_put_s", "next_checkpoint_s"]
    medians = {k: round(statistics.median(r[k] for r in rounds), 1) for k in keys}
    result = {
        "machine": f"{platform.node()} ({os.cpu_count()} cores)",
        "java_start_s": round(java_start_s, 1),
        "rounds": [{k: round(v, 1) for k, v in r.items()} for r in rounds],
        "median": medians,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ha_failover.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Failover on the HA profile: the provider beside Hadoop's Java client (bench/ha_failover.py)",
        "",
        f"Machine: {result['machine']}; {len(rounds)} rounds, medians in seconds from the SIGKILL of the active "
        f"daemon. A JVM's start-up alone (`VersionInfo`): {result['java_start_s']} s, inside the Java figures.",
        "",
        "| failover | the provider | Hadoop's Java client |",
        "|---|---|---|",
        f"| RM: the application's report again | {medians['provider_report_s']} (follow loop, 0.2 s polls) | "
        f"{medians['java_status_s']} (`yarn application -status`) |",
        f"| NameNode: a 4 KiB file written | {medians['runtime_write_s']} (runtime WebHDFS client) | "
        f"{medians['java_put_s']} (`hdfs dfs -put`) |",
        f"| NameNode: the job's next checkpoint on HDFS | {medians['next_checkpoint_s']} "
        "(one every 2 s of training) | |",
        "",
        "Rounds: " + json.dumps(result["rounds"]),
    ]
    (RESULTS / "ha_failover.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
