"""What the local HA cluster profile costs: start-up time, memory, and how long each failover takes.

    TONY_DEVCLUSTER_PORT_BASE=27200 python bench/ha_cluster.py [--rounds 2] [--secure]

Starts the HA profile (``TONY_DEVCLUSTER_HA=1``) in a fresh home (a temporary folder, the jar
cache shared through ``TONY_DEVCLUSTER_JARS``): the first ``up`` formats both NameNodes, the
JournalNode and the ZKFCs' znode; then ``down`` and ``up`` again (a formatted home, what a
developer's later ``make cluster-up HA=1`` costs). Measures each daemon's resident memory once
it is up, then ``--rounds`` times: ``failover rm`` and ``failover nn`` (SIGKILL of the active
one until the other answers as active) and the ``up`` that brings the killed one back as standby.
Writes ``bench/results/ha_cluster.json`` and ``.md`` (``--secure``: the Kerberized HA profile,
``ha_cluster_secure.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
DEVCLUSTER = [sys.executable, str(REPO / "devcluster" / "devcluster.py")]


def _run(env: dict[str, str], *args: str) -> tuple[float, str]:
    began = time.monotonic()
    proc = subprocess.run([*DEVCLUSTER, *args], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"devcluster {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - began, proc.stdout.strip()


def _rss_mb(home: Path) -> dict[str, float]:
    found = {}
    for pid_file in sorted((home / "run").glob("*.pid")):
        pid = pid_file.read_text().strip()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                found[pid_file.stem] = round(int(line.split()[1]) / 1024, 1)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--secure", action="store_true", help="the Kerberized HA profile (a KDC, SPNEGO, the second HDFS)"
    )
    args = parser.parse_args()
    name = "ha_cluster_secure" if args.secure else "ha_cluster"
    jars = os.environ.get("TONY_DEVCLUSTER_JARS") or str(REPO / ".devcluster" / "jars")
    with tempfile.TemporaryDirectory(prefix="tony-ha-bench-") as tmp:
        home = Path(tmp) / "ha"
        env = {**os.environ, "TONY_DEVCLUSTER_HA": "1", "TONY_DEVCLUSTER_HOME": str(home), "TONY_DEVCLUSTER_JARS": jars}
        env.setdefault("TONY_DEVCLUSTER_PORT_BASE", "20500" if args.secure else "20200")
        if args.secure:
            env["TONY_DEVCLUSTER_SECURE"] = "1"
        result: dict[str, object] = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "rounds": args.rounds}
        try:
            result["up_first_s"] = round(_run(env, "up")[0], 1)
            _run(env, "down")
            result["up_formatted_s"] = round(_run(env, "up")[0], 1)
            rss = _rss_mb(home)
            result["rss_mb"] = rss
            result["rss_total_mb"] = round(sum(rss.values()), 1)
            times: dict[str, list[float]] = {"failover_rm_s": [], "failover_nn_s": [], "restart_killed_s": []}
            for _ in range(args.rounds):
                for kind in ("rm", "nn"):
                    times[f"failover_{kind}_s"].append(round(_run(env, "failover", kind)[0], 1))
                    times["restart_killed_s"].append(round(_run(env, "up")[0], 1))
            result.update({k: {"runs": v, "median": round(statistics.median(v), 1)} for k, v in times.items()})
            result["down_s"] = round(_run(env, "down")[0], 1)
        finally:
            subprocess.run([*DEVCLUSTER, "down"], env=env, capture_output=True, check=False)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# The local {'Kerberized ' if args.secure else ''}HA cluster profile (bench/ha_cluster.py"
        f"{' --secure' if args.secure else ''})",
        "",
        f"Machine: {result['machine']}. Ten JVMs: ZooKeeper, a JournalNode, two NameNodes, two ZKFCs, "
        "a DataNode, two ResourceManagers, a NodeManager"
        + ("; with Kerberos also a KDC and the second HDFS's NameNode and DataNode." if args.secure else "."),
        "",
        "| what | seconds |",
        "|---|---|",
        f"| first `up` (formats HDFS, the JournalNode, the ZKFC znode) | {result['up_first_s']} |",
        f"| `up` of a formatted home | {result['up_formatted_s']} |",
    ]
    for key, label in (
        ("failover_rm_s", "`failover rm` (SIGKILL the active RM until the other is active)"),
        ("failover_nn_s", "`failover nn` (SIGKILL the active NameNode until the other is active)"),
        ("restart_killed_s", "`up` bringing the killed one back as standby"),
    ):
        entry = result[key]
        assert isinstance(entry, dict)
        lines.append(f"| {label} | {entry['median']} (runs {entry['runs']}) |")
    lines += [
        "",
        f"Resident memory once up: {result['rss_total_mb']} MB in all.",
        "",
        "| daemon | RSS MB |",
        "|---|---|",
    ]
    lines += [f"| {name} | {mb} |" for name, mb in rss.items()]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
