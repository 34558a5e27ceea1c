#!/usr/bin/env python3
"""From a lost NodeManager to training resumed: restart inside the application vs a new application.

    python bench/node_loss.py [--repeat 1] [--mode mwms-loop] [--keep-cluster]

Runs on a multi-node cluster of its own (the chaos tests' one: state in
``.devcluster-chaos``, ports from the open cluster's base + 900, four
NodeManagers; started here if it is not up, and taken down at the end unless
``--keep-cluster``). For each path, the same job as the chaos tests'
(``tests/chaos/test_strategies.py``: real distributed TensorFlow, by default a
MultiWorkerMirroredStrategy custom loop over three spread workers,
checkpoints to HDFS every 10 steps) is started; once a checkpoint is on HDFS,
the machine of a worker that is neither the AM's nor the uploader's is lost
(its NodeManager and containers SIGKILLed: the survivors' collectives fail at
once), and the clock runs until the uploader takes a step again. Two readings
of that moment: the step's own report time (the script's clock, from the job's
history of metric points: when training resumed), and when this follower first
saw it in the AM's state (that plus the reporting path: a heartbeat, the AM's
publication, the RM's proxy, this poll):

* ``in_application``: ``max_restarts: 1``; the AM replaces the gang in the
  same YARN application.
* ``airflow_retry``: ``max_restarts: 0``; the application fails as retryable
  and a second one is submitted with the same checkpoint dir, as the
  operator does on a retry. Airflow's own share (``retry_delay``, the
  scheduler picking the try up, a worker slot) is not in this figure: it only
  adds to this path.

Both paths run in one invocation, alternating, so that the ratio holds on a
shared machine whose absolute times drift. Writes ``bench/results/node_loss.json``
and ``node_loss.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or REPO / "bench" / "results")

from tests._cluster import devcluster, export_cluster_env, use_chaos_cluster  # noqa: E402
from tests._util import wait_until  # noqa: E402
from tests.integration.dags.training_jobs import (  # noqa: E402 - the chaos tests' job
    STRATEGY_EVERY,
    STRATEGY_MODES,
    STRATEGY_STEPS,
    strategy_job,
)

MODE = "mwms-loop"  # --mode


def chaos_env() -> None:
    """The chaos cluster's variables (forced, never the shared cluster's), the cluster up, its exports."""
    use_chaos_cluster()
    devcluster("up")
    export_cluster_env()


def job(ckpt: str, max_restarts: int) -> Any:
    from airflow_provider_tony.runtime.spec import JobSpec

    return JobSpec.from_dict(strategy_job(MODE, max_restarts, ckpt, name="bench-node-loss"))


def uploader() -> str:
    return STRATEGY_MODES[MODE][0]


def decider_step(client: Any, app_id: str) -> tuple[int, int] | None:
    """(generation, the uploader's step) as the AM last published them."""
    doc = client.am_state(app_id)
    task = doc.task(uploader()) if doc is not None else None
    if task is None or task.progress is None or task.progress.step is None:
        return None
    return doc.generation, task.progress.step


def one_run(client: Any, rm_url: str, path: str) -> dict[str, Any]:
    from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
    from tests.chaos._support import victim_of

    hdfs = client.hdfs()
    ckpt = f"/tmp/bench-node-loss-{uuid.uuid4().hex[:8]}"
    apps: list[str] = []
    victim: int | None = None
    try:
        app_id = client.submit(job(ckpt, 1 if path == "in_application" else 0))
        apps.append(app_id)
        wait_until(lambda: remote_checkpoints(hdfs, ckpt), 300, "first checkpoint")
        doc = client.am_state(app_id)
        # The chaos test's choice: a worker's node, neither the AM's nor the uploader's.
        victim, _ = victim_of(SimpleNamespace(rm_url=rm_url), app_id, doc, uploader())
        lost, lost_wall = time.monotonic(), time.time()
        devcluster("stop-nm", str(victim), "--lose")
        if path == "in_application":
            got = wait_until(lambda: (s := decider_step(client, app_id)) and s[0] == 1 and s, 600, "training resumed")
            seen_s = time.monotonic() - lost
            final = client.wait(app_id, poll_interval=1.0)
            record = final.am_state.restarts[0] if final.am_state and final.am_state.restarts else None
            stepped = first_report_after(client, app_id, record.at_wall if record and record.at_wall else lost_wall)
            redone = (
                max(0, record.last_step - record.resumed_step)
                if record and record.last_step is not None and record.resumed_step is not None
                else None
            )
            detected_s = record.at_wall - lost_wall if record and record.at_wall else None
        else:
            first = client.wait(app_id, poll_interval=0.5)
            failed_s = time.monotonic() - lost
            verdict = first.am_state.milestone_wall("verdict") if first.am_state else None
            detected_s = verdict - lost_wall if verdict else None
            assert not first.succeeded and first.retryable, first.diagnostics
            last_step = decider_step_of(first)
            retry = client.submit(job(ckpt, 0), attempt=2)
            apps.append(retry)
            got = wait_until(lambda: decider_step(client, retry), 600, "training resumed in the new application")
            seen_s = time.monotonic() - lost
            final = client.wait(retry, poll_interval=1.0)
            stepped = first_report_after(client, retry, lost_wall)
            task = final.am_state.task(uploader()) if final.am_state else None
            restored = task.restored_step if task is not None else None
            redone = max(0, last_step - restored) if last_step is not None and restored is not None else None
        return {
            # the script's first step after the loss, by its own report's time
            "loss_to_training_resumed_s": round(stepped - lost_wall, 2) if stepped is not None else None,
            # the same step as this follower first saw it (reporting path included)
            "loss_to_resumed_seen_s": round(seen_s, 2),
            "steps_redone": redone,
            # the fault noticed: the AM's restart decision, or its failure verdict
            "loss_to_detected_s": round(detected_s, 2) if detected_s is not None else None,
            "applications": len(apps),
            "succeeded": final.succeeded,
            "first_step_seen": got[1],
            **({"loss_to_failed_s": round(failed_s, 2)} if path == "airflow_retry" else {}),
        }
    finally:
        for app in apps:
            try:
                client.kill(app)
            except Exception:  # noqa: BLE001 - finished already
                pass
        if victim is not None:
            devcluster("start-nm", str(victim))
        hdfs.delete(ckpt, recursive=True)


def first_report_after(client: Any, app_id: str, after_wall: float) -> float | None:
    """Wall time of the uploader's first step report after ``after_wall``, from the job's history."""
    history = client.job_history(app_id)
    points = history.metrics.get(uploader(), []) if history is not None else []
    times = [p.time for p in points if p.time is not None and p.step is not None and p.time > after_wall]
    return min(times) if times else None


def decider_step_of(result: Any) -> int | None:
    task = result.am_state.task(uploader()) if result.am_state else None
    return task.progress.step if task is not None and task.progress is not None else None


def main() -> int:
    global MODE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--mode", choices=sorted(STRATEGY_MODES), default=MODE, help="the training strategy")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the chaos cluster running")
    args = parser.parse_args()
    MODE = args.mode
    chaos_env()
    from airflow_provider_tony.yarn.client import TonyClient

    runs: dict[str, list[dict[str, Any]]] = {"in_application": [], "airflow_retry": []}
    try:
        with TonyClient.from_env() as client:
            for _ in range(args.repeat):
                for path in runs:
                    runs[path].append(one_run(client, os.environ["TONY_RM_URL"], path))
                    print(path, runs[path][-1], file=sys.stderr)
    finally:
        if not args.keep_cluster:
            devcluster("down")
    summary = {}
    for path, items in runs.items():
        times = [r["loss_to_training_resumed_s"] for r in items if r.get("loss_to_training_resumed_s") is not None]
        seen = [r["loss_to_resumed_seen_s"] for r in items if r.get("loss_to_resumed_seen_s") is not None]
        summary[path] = {
            "median_s": round(statistics.median(times), 2) if times else None,
            "median_seen_s": round(statistics.median(seen), 2) if seen else None,
            "runs": items,
        }
    a, b = summary["in_application"]["median_s"], summary["airflow_retry"]["median_s"]
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "job": f"{MODE}: {STRATEGY_MODES[MODE][1]}, {STRATEGY_STEPS} steps, checkpoint every {STRATEGY_EVERY}, "
        "a worker's machine SIGKILLed",
        "paths": summary,
        "retry_over_in_application": round(b / a, 2) if a and b else None,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "node_loss.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        f"# Node loss to training resumed ({doc['date']}, {doc['cpus']} CPUs)",
        "",
        f"Job: {doc['job']}. Airflow's retry_delay and scheduling are not included in the retry path. "
        "Training resumed: the uploader's first step report after the loss, by the report's own time; "
        "as the follower saw it: when that step first showed in the AM's state through the RM's proxy.",
        "",
        "| path | loss -> training resumed (median s) | ... as the follower saw it (median s) "
        "| loss -> detected (s) | steps redone | applications |",
        "|---|---|---|---|---|---|",
    ]
    for path, s in summary.items():
        detected = [r.get("loss_to_detected_s") for r in s["runs"]]
        redone = [r.get("steps_redone") for r in s["runs"]]
        apps = [r.get("applications") for r in s["runs"]]
        lines.append(f"| {path} | {s['median_s']} | {s['median_seen_s']} | {detected} | {redone} | {apps} |")
    lines += ["", f"retry / in-application: {doc['retry_over_in_application']}"]
    (RESULTS / "node_loss.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
