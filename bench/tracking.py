#!/usr/bin/env python3
"""What following running jobs costs, before (skein driver) and after (HTTP), side by side in one run.

    python bench/tracking.py [--jobs 20] [--seconds 120] [--poll-interval 5] [--warmup 15]
    python bench/tracking.py --smoke     # one job, seconds per mode: does it still run?

Submits ``--jobs`` sleeping one-worker jobs, waits until all run, then follows
them in a fresh child process per mode, one mode after the other, each for
``--seconds`` after a warm-up, and reports the child's CPU-seconds per hour and
its resident memory, counting its whole process tree (a skein driver JVM is
a child of the Python process that starts it):

* ``polling``: one job followed the way the operator's ``execute`` follows it;
* ``deferred``: 1 and ``--jobs`` jobs followed by triggers in one event loop,
  the way Airflow's triggerer runs them.

"before" is the way this provider followed jobs until it served the AM's
state over HTTP: YARN's report and the AM's state document through one skein
driver (a JVM) per process, shared by every trigger, its blocking calls in
threads. "after" is the current code: ``TonyClient.poll`` and ``TonyTrigger``
over plain HTTP (RM REST, the AM's page through the RM's proxy), no JVM.
The AM publishes to both places, so both ways follow the very same jobs.

Results go to ``bench/results/tracking.json`` and ``.md`` (``$TONY_BENCH_RESULTS`` instead when
set: ``bench/smoke.py`` writes there, never over the real figures). Absolute figures
drift on a shared machine; the before/after pairs are taken minutes apart on
the same jobs, which is what makes them comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import proctree  # noqa: E402

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or REPO / "bench" / "results")
BEHAVE = REPO / "tests" / "integration" / "jobs" / "behave.py"
WARMUP_S = 15.0  # the first polls start a driver, import httpx, open connections: not steady state


# ---------------------------------------------------------------- the followers (run in a child process)


def _before_poll(client: Any, app_id: str) -> None:
    """One look as the skein-driver follower took it: YARN's report, then the state from the store."""
    from airflow_provider_tony.runtime import constants as C

    report = client.application_report(app_id)
    if str(report.state) == "RUNNING":
        client.connect(app_id, wait=False).kv.get(C.KV_STATE)


def child(mode: str, apps: list[str], seconds: float, interval: float, warmup: float) -> dict[str, Any]:
    import asyncio

    pid = os.getpid()

    def measure(run_for: float) -> dict[str, float]:
        time.sleep(warmup)
        before = proctree.usage(pid)
        time.sleep(run_for)
        after = proctree.usage(pid)
        return {"cpu": after["cpu"] - before["cpu"], "rss_mib": after["rss_mib"], "jvms": after["jvms"]}

    if mode == "polling-before":
        import threading

        import skein

        from airflow_provider_tony.yarn.jvm import JVM_OPTIONS

        client = skein.Client(log_level="error", java_options=list(JVM_OPTIONS))
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                _before_poll(client, apps[0])
                stop.wait(interval)

        threading.Thread(target=loop, daemon=True).start()
        out = measure(seconds)
        stop.set()
        client.close()
        return out
    if mode == "polling-after":
        import threading

        from airflow_provider_tony.yarn.client import TonyClient
        from airflow_provider_tony.yarn.follower import Follower

        tony = TonyClient.from_env()
        follower = Follower(apps[0], startup_timeout=600, am_stale_timeout=600)
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                tony.poll(follower, emit=lambda _line: None)
                stop.wait(interval)

        threading.Thread(target=loop, daemon=True).start()
        out = measure(seconds)
        stop.set()
        return out

    async def deferred() -> dict[str, float]:
        if mode == "deferred-before":
            import skein

            from airflow_provider_tony.yarn.jvm import JVM_OPTIONS

            shared = skein.Client(log_level="error", java_options=list(JVM_OPTIONS))  # one per connection

            async def one(app: str) -> None:
                while True:
                    await asyncio.to_thread(_before_poll, shared, app)
                    await asyncio.sleep(interval)
        else:
            from airflow_provider_tony.triggers.tony import TonyTrigger

            async def one(app: str) -> None:
                trig = TonyTrigger(
                    app_id=app,
                    yarn_conn_id="tony_yarn_default",
                    poll_interval=interval,
                    startup_timeout=600,
                    am_stale_timeout=600,
                )
                async for event in trig.run():
                    raise RuntimeError(f"{app} ended while measured: {event.payload}")

        tasks = [asyncio.create_task(one(a)) for a in apps]
        await asyncio.sleep(warmup)
        before = proctree.usage(pid)
        await asyncio.sleep(seconds)
        after = proctree.usage(pid)
        for task in tasks:
            if task.done() and task.exception():
                raise task.exception()  # type: ignore[misc]
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {"cpu": after["cpu"] - before["cpu"], "rss_mib": after["rss_mib"], "jvms": after["jvms"]}

    return asyncio.run(deferred())


# ---------------------------------------------------------------- the run


def run_child(mode: str, apps: list[str], seconds: float, interval: float, warmup: float) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--apps",
        ",".join(apps),
        "--seconds",
        str(seconds),
        "--poll-interval",
        str(interval),
        "--warmup",
        str(warmup),
    ]
    env = {**os.environ, "AIRFLOW_HOME": tempfile.mkdtemp(prefix="tony-bench-"), "PYTHONPATH": str(REPO)}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 300, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{out.stderr[-3000:]}")
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "jobs": len(apps),
        "cpu_seconds_per_hour": round(doc["cpu"] / seconds * 3600, 1),
        "rss_mib": round(doc["rss_mib"], 1),
        "jvms": doc["jvms"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=WARMUP_S, help="seconds before each mode is measured")
    parser.add_argument(
        "--smoke", action="store_true", help="one job, 3 s per mode after 2 s, polled every second: does it run?"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--apps", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.seconds, args.warmup, args.poll_interval = 1, 3.0, 2.0, 1.0
    if args.child:
        print(json.dumps(child(args.child, args.apps.split(","), args.seconds, args.poll_interval, args.warmup)))
        return 0

    from airflow_provider_tony.runtime.spec import JobSpec
    from airflow_provider_tony.yarn.client import TonyClient

    spec = JobSpec.from_dict(
        {
            "name": "bench-tracking",
            "python": {"interpreter": sys.executable},
            "tags": ["tony-bench"],
            "heartbeat_interval": 1,
            "heartbeat_timeout": 60,
            "am_memory": 384,
            "roles": {"worker": {"instances": 1, "memory": "128 MiB", "script": str(BEHAVE), "args": ["sleep"]}},
        }
    )
    client = TonyClient.from_env()
    apps = [client.submit(spec) for _ in range(args.jobs)]
    rows: dict[str, dict[str, Any]] = {}
    try:
        # On a busy machine some AMs miss YARN's liveness timeout and fail before running:
        # replace those (they are not what is measured) until all run.
        deadline = time.monotonic() + 1200
        while True:
            running = [a for a in apps if (d := client.am_state(a)) is not None and d.app_state == "RUNNING"]
            if len(running) == len(apps):
                break
            for i, app in enumerate(apps):
                if app not in running and not client.report(app).active:
                    apps[i] = client.submit(spec)
                    print(f"{app} ended before running; replaced by {apps[i]}", flush=True)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{args.jobs} jobs did not all run within 1200 s")
            time.sleep(5)
        # Every mode's follower runs in its child; this process (HTTP only) adds no JVM.
        modes: tuple[tuple[str, list[str]], ...] = (
            ("polling-before", apps[:1]),
            ("polling-after", apps[:1]),
            ("deferred-before", apps[:1]),
            ("deferred-after", apps[:1]),
            ("deferred-before", apps),
            ("deferred-after", apps),
        )
        if len(apps) == 1:  # the 1-job rows again would measure nothing new
            modes = modes[:4]
        for mode, followed in modes:
            key = f"{mode} ({len(followed)} job{'s' if len(followed) > 1 else ''})"
            rows[key] = run_child(mode, followed, args.seconds, args.poll_interval, args.warmup)
            print(key, rows[key], flush=True)
    finally:
        for app in apps:
            try:
                client.kill(app)
            except Exception as exc:  # noqa: BLE001 - report, keep killing the others
                print(f"could not kill {app}: {exc}", file=sys.stderr)
        client.close()
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "seconds": args.seconds,
        "poll_interval_s": args.poll_interval,
        "warmup_s": args.warmup,
        "note": "whole process trees (a skein driver JVM counts with its Python process); "
        f"load average {os.getloadavg()[0]:.1f} when written",
        "results": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tracking.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["| mode | jobs | CPU-s/h | RSS MiB | JVMs |", "|---|---|---|---|---|"]
    lines += [
        f"| {k} | {v['jobs']} | {v['cpu_seconds_per_hour']} | {v['rss_mib']} | {v['jvms']} |" for k, v in rows.items()
    ]
    (RESULTS / "tracking.md").write_text(
        f"{doc['date']}, {doc['cpus']} CPUs, {args.seconds:g} s per mode, "
        f"poll every {args.poll_interval:g} s; {doc['note']}\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
