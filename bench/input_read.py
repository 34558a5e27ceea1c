"""Input read throughput per task vs ``hdfs dfs -cat`` of the same files, and staging time before user code.

    python bench/input_read.py [--mib 200] [--files 8] [--small 100] [--repeat 5] [--no-job]

Writes a partition of ``--files`` files, ``--mib`` MiB in all (random bytes:
what is measured is moving bytes, not parsing them), under the cluster user's
home on HDFS, then for the shard of one task of two (``sharding: shard``) and
for the whole partition (``all``) measures:

- the floor: ``hdfs dfs -cat FILES > /dev/null`` (Hadoop's FsShell over the
  HDFS protocol, the JVM's start included; the start alone, a ``-cat`` of an
  empty file, is reported beside it), and the same files three times in one
  ``-cat``, whose two extra reads give the JVM's read rate without its start;
- what a streaming reader could do at best: the same WebHDFS reads into memory, dropped;
- staging as a task does it: ``inputs.stage_inputs`` (WebHDFS, to local disk,
  ``PARALLEL_READS`` files at once), and the same with one file at a time;

then the same for ``--small`` files of half a MiB each (where reading is latency-bound, not
bandwidth-bound), and, unless ``--no-job``, runs one real job of two workers whose script only
reads its manifest, and takes from the job's events how long each task spent
staging before its script started. Writes ``bench/results/input_read.json``
and ``.md``; needs the local cluster's environment
(``eval "$(make -s cluster-env)"``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import inputs
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.client import TonyClient

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or Path(__file__).parent / "results")
MIB = 2**20


def fsshell() -> list[str]:
    """``hdfs dfs`` as the Hadoop scripts run it: FsShell on the configuration and the client jars."""
    home = Path(os.environ["TONY_DEVCLUSTER_HOME"])
    jars = Path(os.environ.get("TONY_DEVCLUSTER_JARS") or home / "jars")
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
    classpath = f"{os.environ['HADOOP_CONF_DIR']}:{jars}/*"
    return [str(java), "-Xmx256m", "-cp", classpath, "org.apache.hadoop.fs.FsShell"]


def java_env() -> dict[str, str]:
    opens = " ".join(
        f"--add-opens=java.base/{p}=ALL-UNNAMED"
        for p in ("java.lang", "java.util", "java.util.concurrent", "java.net", "java.io", "java.nio", "sun.nio.ch")
    )
    return {**os.environ, "JDK_JAVA_OPTIONS": opens, "HADOOP_USER_NAME": os.environ.get("TONY_WEBHDFS_USER", "")}


def cat_seconds(paths: list[str]) -> float:
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run([*fsshell(), "-cat", *paths], stdout=sink, env=java_env(), check=True)  # noqa: S603
    return time.perf_counter() - started


def write_partition(client: Any, remote: str, mib: int, files: int) -> None:
    per = mib * MIB // files
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(files):
            Path(tmp, f"part-{i:05d}.tfrecord").write_bytes(os.urandom(per))
        Path(tmp, "_SUCCESS").write_bytes(b"")
        client.makedirs(remote.rsplit("/", 1)[0])
        client.upload(remote, tmp, n_threads=1)
        client.write(f"{remote}/empty", data=b"", overwrite=True)  # -cat of it: the JVM's start alone


def spec_for(remote: str, sharding: str, python: str, command: list[str] | None = None) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "bench-input-read",
            "roles": {"worker": {"instances": 2, "memory": "512 MiB", "command": command or [python, "-c", "pass"]}},
            "python": {"interpreter": python},
            "inputs": {"data": {"path": remote, "sharding": sharding}},
        }
    )


def stage_seconds(client: Any, spec: JobSpec, parallel: int) -> tuple[float, int]:
    old, inputs.PARALLEL_READS = inputs.PARALLEL_READS, parallel
    try:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            _, staged = inputs.stage_inputs(client, spec, "worker:0", Path(tmp), {}, lambda _: None)
            return time.perf_counter() - started, staged[0].bytes
    finally:
        inputs.PARALLEL_READS = old


def stream_seconds(client: Any, items: list[inputs.InputFile]) -> float:
    """What a streaming reader could do at best: the same WebHDFS reads, one file after another, into
    memory and dropped (no disk), as a record generator handed to ``tf.data`` would read them each epoch."""
    started = time.perf_counter()
    for item in items:
        with client.read(item.hdfs, chunk_size=1 << 20) as reader:
            for _chunk in reader:
                pass
    return time.perf_counter() - started


READER = (
    "import json, os, time\n"
    "from airflow_provider_tony.runtime import inputs, progress\n"
    "files = inputs.files('data')\n"
    "progress.report(started=time.time(), files=len(files), bytes=sum(os.path.getsize(f) for f in files))\n"
)


def job_staging(tc: TonyClient, remote: str) -> dict[str, Any]:
    """A real job: the staging events of each task (seconds, MiB/s) and the job's start-up."""
    spec = spec_for(remote, "shard", sys.executable, [sys.executable, "-c", READER])
    started = time.perf_counter()
    app_id = tc.submit(spec, extra_tags=["bench-input-read"])
    result = tc.wait(app_id, poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    state = result.am_state
    staged = {}
    for event in state.events:
        m = re.match(r"(\S+) staged input data: (\d+) files, ([\d.]+) MiB in ([\d.]+)s \(([\d.]+) MiB/s\)", event)
        if m:
            staged[m.group(1)] = {"files": int(m.group(2)), "mib": float(m.group(3)), "seconds": float(m.group(4))}
            staged[m.group(1)]["mib_per_s"] = float(m.group(5))
    return {"app_id": app_id, "wall_s": round(time.perf_counter() - started, 1), "tasks": staged}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=200)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--small", type=int, default=100, help="files of half a MiB in the small-files case")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--no-job", action="store_true")
    args = p.parse_args()
    out: dict[str, Any] = {"mib": args.mib, "files": args.files, "repeat": args.repeat}
    with TonyClient.from_env() as tc:
        client = tc.hdfs()
        remote = f"/user/{tc.webhdfs_user}/bench-input-read-{uuid.uuid4().hex[:8]}/dt=2026-12-01"
        try:
            write_partition(client, remote, args.mib, args.files)
            listed = inputs.list_input(client, remote)
            listed = [f for f in listed if f.rel != "empty"]
            out["jvm_start_s"] = round(min(cat_seconds([f"{remote}/empty"]) for _ in range(args.repeat)), 2)
            small = remote.replace("dt=", "small-dt=")
            write_partition(client, small, args.small // 2, args.small)
            small_listed = [f for f in inputs.list_input(client, small) if f.rel != "empty"]
            cases = [("shard", f"{remote}/part-*", listed), ("all", f"{remote}/part-*", listed)]
            cases.append(("small", f"{small}/part-*", small_listed))
            for case, path, case_listed in cases:
                sharding = "shard" if case == "shard" else "all"
                spec = spec_for(path, sharding, sys.executable)
                mine, _, _ = inputs.shard_of(spec, "data", case_listed, "worker:0")
                nbytes = sum(f.size for f in mine)
                cat = [cat_seconds([f.hdfs for f in mine]) for _ in range(args.repeat)]
                staged = {n: [stage_seconds(client, spec, n)[0] for _ in range(args.repeat)] for n in (1, 8)}
                row = {"files": len(mine), "mib": round(nbytes / MIB, 1), "cat_s": round(min(cat), 2)}
                row["cat_mib_per_s"] = round(nbytes / MIB / min(cat), 1)
                # The JVM's start cancelled out: the same files three times in one -cat, less once.
                thrice = [cat_seconds([f.hdfs for f in mine] * 3) for _ in range(args.repeat)]
                extra = min(thrice) - min(cat)
                row["cat3_s"] = round(min(thrice), 2)
                row["cat_marginal_mib_per_s"] = round(2 * nbytes / MIB / extra, 1) if extra > 0 else None
                streamed = min(stream_seconds(client, mine) for _ in range(args.repeat))
                row["stream_s"] = round(streamed, 2)
                row["stream_mib_per_s"] = round(nbytes / MIB / streamed, 1)
                for n, times in staged.items():
                    row[f"stage_{n}_s"] = round(min(times), 2)
                    row[f"stage_{n}_mib_per_s"] = round(nbytes / MIB / min(times), 1)
                out[case] = row
                print(case, row, flush=True)
            if not args.no_job:
                out["job"] = job_staging(tc, f"{remote}/part-*")
                print("job", out["job"], flush=True)
        finally:
            client.delete(remote.rsplit("/", 1)[0], recursive=True)
    out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    out["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
    out["parallel_reads"] = inputs.PARALLEL_READS
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "input_read.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / "input_read.md").write_text(markdown(out))
    return 0


def markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Input read throughput (bench/input_read.py)",
        "",
        f"A partition of {r['files']} files, {r['mib']} MiB on the local single-node cluster ({r['machine']});"
        f" the best of {r['repeat']} runs (the least disturbed); load average at the end {r['load_average']}"
        " (other work shared the machine). The floor is `hdfs dfs -cat` of the same files to /dev/null"
        f" (its JVM start alone: {r['jvm_start_s']} s, included). Staging is `inputs.stage_inputs` as a task"
        " runs it: WebHDFS to local disk, with 1 and with 8 files at a time. Streamed is what a reader handing"
        " WebHDFS reads to `tf.data` could do at best (into memory, dropped), every epoch again.",
        "",
        "| what one task reads | files | MiB | `hdfs dfs -cat` s (MiB/s) | the files 3 times in one `-cat`: s"
        " (MiB/s of the 2 extra reads, JVM start cancelled)"
        " | streamed to memory, 1 at a time s (MiB/s) | staged, 1 at a time s (MiB/s)"
        " | staged, 8 at a time s (MiB/s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    labels = (("shard", "its shard (1 of 2)"), ("all", "every file"), ("small", "every file, small files"))
    for key, label in labels:
        row = r[key]
        lines.append(
            f"| {label} | {row['files']} | {row['mib']} | {row['cat_s']} ({row['cat_mib_per_s']})"
            f" | {row['cat3_s']} ({row['cat_marginal_mib_per_s'] or 'n/a: no slower than once, noise'})"
            f" | {row['stream_s']} ({row['stream_mib_per_s']})"
            f" | {row['stage_1_s']} ({row['stage_1_mib_per_s']}) | {row['stage_8_s']} ({row['stage_8_mib_per_s']}) |"
        )
    if "job" in r:
        lines += [
            "",
            f"A real job of two workers (`sharding: shard`, {r['job']['app_id']}, {r['job']['wall_s']} s submit to"
            " end): time each task spent staging before its script started, from the job's events:",
            "",
            "| task | files | MiB | staging s | MiB/s |",
            "|---|---|---|---|---|",
        ]
        for task, t in sorted(r["job"]["tasks"].items()):
            lines.append(f"| {task} | {t['files']} | {t['mib']} | {t['seconds']} | {t['mib_per_s']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
