#!/usr/bin/env python3
"""``TonyOperator.execute`` to submitted: this code against an older revision, side by side in one run.

    python bench/submit_time.py --before /tmp/before [--rounds 5]

``--before`` is a checkout of the revision to compare with (for issue 19, the
parent of the commit that first followed jobs over HTTP, when the operator
followed through skein's driver). Each round runs, for each side and each
mode, a fresh Python process (as an Airflow worker runs a task) with
``PYTHONPATH`` at that side's code; it builds a ``TonyOperator``, calls
``execute`` and times it from entry to the moment the application id is known:

* ``deferred``: ``execute`` returns by deferring (``TaskDeferred``), the id in hand;
* ``polling``: ``execute`` reaches ``poll_until_complete`` (stubbed to stop there).

Imports are timed apart (``import_s``): Airflow imports the operator before
``execute``. Each round also runs ``tony submit --detach`` (the CLI, no
Airflow) as its own process, timed from start to exit with its whole process
tree's peak memory, and once ``import airflow.sdk`` alone: the floor under
any Airflow task process, before a provider's code. The application is killed after the timing, by the same hook.
Sides alternate within a round, so load on a shared machine falls on both.
Results go to ``bench/results/submit_time.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or REPO / "bench" / "results")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from proctree import usage  # noqa: E402 - the bench folder's own helper


class _Reached(Exception):
    """Raised by the stubbed ``poll_until_complete``: the application id is known."""


class _TI:
    """The parts of a task instance ``execute`` reads (unique run id: no re-attach)."""

    dag_id, task_id, map_index, try_number = "bench_submit", "train", -1, 1

    def __init__(self) -> None:
        self.run_id = f"bench__{uuid.uuid4().hex[:12]}"
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def child(mode: str) -> dict[str, Any]:
    """One ``execute`` in this process, with whatever code ``PYTHONPATH`` points at."""
    t0 = time.perf_counter()
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_provider_tony.operators.tony import TonyOperator

    import_s = time.perf_counter() - t0
    job = {
        "name": "bench-submit",
        "python": {"interpreter": sys.executable},
        "am_memory": 384,
        "roles": {"worker": {"instances": 1, "memory": "128 MiB", "command": ["true"]}},
    }
    op = TonyOperator(task_id="train", job=job, deferrable=mode == "deferred")
    if mode == "polling":

        def reached(*_args: Any, **_kwargs: Any) -> Any:
            raise _Reached

        op.poll_until_complete = reached  # type: ignore[method-assign]
    phases: dict[str, float] = {}
    hook = op.hook
    for name in ("find_by_tags", "submit"):  # the two cluster calls of ``submit_job``, timed apart
        call = getattr(hook, name)

        def timed(*args: Any, _name: str = name, _call: Any = call, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return _call(*args, **kwargs)
            finally:
                phases[_name] = phases.get(_name, 0.0) + time.perf_counter() - began

        setattr(hook, name, timed)
    ti = _TI()
    rss_at_execute = usage(os.getpid())["rss_mib"]
    start = time.perf_counter()
    try:
        op.execute({"ti": ti})
    except (TaskDeferred, _Reached):
        pass
    seconds = time.perf_counter() - start
    app_id = ti.xcom.get("application_id")
    if not app_id:
        raise RuntimeError(f"execute ended without an application id: {ti.xcom}")
    try:
        op.hook.kill(app_id)
    finally:
        op.hook.close()
    return {
        "seconds": seconds,
        "import_s": import_s,
        "rss_at_execute_mib": rss_at_execute,
        "app_id": app_id,
        **{f"{k}_s": v for k, v in phases.items()},
    }


def _start(src: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AIRFLOW_HOME": tempfile.mkdtemp(prefix="tony-bench-"), "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--child", mode]
    # Files, not pipes: nobody reads a pipe while the watcher samples, and Airflow logs a lot.
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=src)
    _OUTPUT[proc.pid] = (out, err)
    return proc


_OUTPUT: dict[int, tuple[Any, Any]] = {}


def _finish(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    proc.wait(timeout=600)
    files = _OUTPUT.pop(proc.pid)
    for fh in files:
        fh.seek(0)
    out, err = (fh.read() for fh in files)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _watch(procs: list[subprocess.Popen[str]]) -> dict[str, float]:
    """Peak resident MiB (all the processes' trees together, sampled every 20 ms) and most JVMs seen."""
    peak = jvms = 0.0
    while any(p.poll() is None for p in procs):
        seen = [usage(p.pid) for p in procs if p.poll() is None]
        peak = max(peak, sum(u["rss_mib"] for u in seen))
        jvms = max(jvms, sum(u["jvms"] for u in seen))
        time.sleep(0.02)
    return {"peak_rss_mib": peak, "jvms": jvms}


def run_child(src: Path, mode: str) -> dict[str, Any]:
    proc = _start(src, mode)
    watched = _watch([proc])
    return {**_finish(proc, f"{mode} with {src}"), **watched}


_CLI_JOB = """name: bench-submit-cli
am_memory: 384
roles:
  worker:
    instances: 1
    memory: 128 MiB
    command: ["true"]
"""


def run_cli(src: Path) -> dict[str, Any]:
    """``tony submit --detach`` of a one-worker job: wall seconds to exit and the tree's peak RSS; then killed."""
    job = Path(tempfile.mkdtemp(prefix="tony-bench-cli-")) / "job.yaml"
    job.write_text(_CLI_JOB)
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-m", "airflow_provider_tony", "submit", "--detach", str(job)]
    out = tempfile.TemporaryFile("w+")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=src)
    watched = _watch([proc])
    proc.wait(timeout=600)
    seconds = time.perf_counter() - t0
    out.seek(0)
    text = out.read()
    app_ids = [w for w in text.split() if w.startswith("application_")]
    if proc.returncode != 0 or not app_ids:
        raise RuntimeError(f"tony submit with {src} failed:\n{text[-3000:]}")
    from airflow_provider_tony.yarn.client import TonyClient

    TonyClient.from_env().kill(app_ids[-1])
    return {"seconds": seconds, **watched}


def import_floor() -> float:
    """Peak RSS MiB of a process that imports ``airflow.sdk`` and nothing else."""
    proc = subprocess.Popen([sys.executable, "-c", "import airflow.sdk"], env={**os.environ})
    peak = _watch([proc])["peak_rss_mib"]
    return peak if proc.wait(timeout=300) == 0 else float("nan")


def run_many(src: Path, count: int) -> dict[str, Any]:
    """``count`` tasks submitting at once (a mapped sweep on one worker): wall time and total CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [_start(src, "polling") for _ in range(count)]
    watched = _watch(procs)
    for proc in procs:
        _finish(proc, f"one of {count} with {src}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"tasks": count, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), **watched}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="checkout of the revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=20, help="tasks submitting at once (0: skip)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if args.before is None:
        parser.error("--before is required")
    sides = {"before": args.before.resolve(), "now": REPO}
    revs = {
        side: subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for side, src in sides.items()
    }
    samples: dict[str, list[dict[str, Any]]] = {}
    cli: dict[str, list[dict[str, Any]]] = {}
    floor = import_floor()
    for round_no in range(args.rounds):
        for mode in ("deferred", "polling"):
            order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
            for side in order:
                got = run_child(sides[side], mode)
                samples.setdefault(f"{side} {mode}", []).append(got)
                print(f"round {round_no + 1} {side} {mode}: {got['seconds']:.2f} s", flush=True)
        for side in list(sides) if round_no % 2 == 0 else list(reversed(sides)):
            got = run_cli(sides[side])
            cli.setdefault(side, []).append(got)
            print(f"round {round_no + 1} {side} tony submit: {got['seconds']:.2f} s", flush=True)
    rows = {
        key: {
            "rounds": len(got),
            "median_s": round(statistics.median(g["seconds"] for g in got), 2),
            "min_s": round(min(g["seconds"] for g in got), 2),
            "max_s": round(max(g["seconds"] for g in got), 2),
            "import_median_s": round(statistics.median(g["import_s"] for g in got), 2),
            "find_by_tags_median_s": round(statistics.median(g.get("find_by_tags_s", 0.0) for g in got), 2),
            "submit_median_s": round(statistics.median(g.get("submit_s", 0.0) for g in got), 2),
            "peak_rss_mib_median": round(statistics.median(g["peak_rss_mib"] for g in got)),
            "rss_at_execute_mib_median": round(statistics.median(g.get("rss_at_execute_mib", 0.0) for g in got)),
            "jvms_max": max(g["jvms"] for g in got),
        }
        for key, got in sorted(samples.items(), key=lambda kv: (kv[0].split()[1], kv[0].split()[0]))
    }
    cli_rows = {
        side: {
            "rounds": len(got),
            "median_s": round(statistics.median(g["seconds"] for g in got), 2),
            "peak_rss_mib_median": round(statistics.median(g["peak_rss_mib"] for g in got)),
            "peak_rss_mib_max": round(max(g["peak_rss_mib"] for g in got)),
            "jvms_max": max(g["jvms"] for g in got),
        }
        for side, got in cli.items()
    }
    many = {}
    if args.concurrent:
        for side in sides:
            many[side] = run_many(sides[side], args.concurrent)
            print(f"{args.concurrent} at once, {side}: {many[side]}", flush=True)
    load = os.getloadavg()
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "load_avg_1_5_15_at_end": [round(x, 2) for x in load],
        "revisions": revs,
        "note": "execute from entry to the application id known, a fresh process per sample; "
        "the machine was shared with other work while measured",
        "results": rows,
        "cli": cli_rows,
        "airflow_sdk_import_rss_mib": round(floor),
        "concurrent": many,
        "samples_s": {k: [round(g["seconds"], 3) for g in v] for k, v in samples.items()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "submit_time.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "| side | mode | rounds | median s | min s | max s | of it: lookup / submit (medians) | import s "
        "| peak RSS MiB (process tree) | RSS at execute MiB | JVMs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, v in rows.items():
        side, mode = key.split()
        lines.append(
            f"| {side} ({revs[side]}) | {mode} | {v['rounds']} | {v['median_s']} | {v['min_s']} | "
            f"{v['max_s']} | {v['find_by_tags_median_s']} / {v['submit_median_s']} | {v['import_median_s']} "
            f"| {v['peak_rss_mib_median']} | {v['rss_at_execute_mib_median']} | {v['jvms_max']} |"
        )
    lines += [
        "",
        "`tony submit --detach` (the CLI, no Airflow), its own process from start to exit:",
        "",
        "| side | rounds | median s (imports included) | peak RSS MiB (process tree), median / max | JVMs |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {side} ({revs[side]}) | {c['rounds']} | {c['median_s']} | {c['peak_rss_mib_median']} / "
        f"{c['peak_rss_mib_max']} | {c['jvms_max']} |"
        for side, c in cli_rows.items()
    ]
    lines += ["", f"A process that imports `airflow.sdk` and nothing else peaks at {round(floor)} MiB."]
    if many:
        lines += [
            "",
            f"{args.concurrent} tasks submitting at once (polling mode, each a fresh process):",
            "",
            "| side | wall s | total CPU s | peak RSS MiB (all trees) | JVMs at once |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {side} ({revs[side]}) | {m['wall_s']} | {m['cpu_s']} | {round(m['peak_rss_mib'])} | {int(m['jvms'])} |"
            for side, m in many.items()
        ]
    (RESULTS / "submit_time.md").write_text(
        f"{doc['date']}, {doc['cpus']} CPUs, load {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} at the end; "
        f"{doc['note']}\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
