"""A task that misbehaves on request, for the runtime's failure-policy tests.

    behave.py MODE [--index I] [--code C] [--seconds S] [--freeze-after S]

Only the task whose TONY_TASK_INDEX equals --index misbehaves; the others
sleep until stopped (so that their siblings' fate is decided by the AM).
``ok`` and ``tfconfig`` report and exit at once: the executor's exit record
carries the last progress to the AM, no heartbeat has to.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from airflow_provider_tony.runtime import progress


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["ok", "exit", "stop-executor", "kill-executor", "stall", "sleep", "tfconfig"])
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--role", default="worker")
    p.add_argument("--code", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3600)
    # bench/run.py's failure section only: the executor is frozen or killed S seconds after the
    # report, so that a heartbeat has carried the report to the AM and the bench can time the
    # failure from the report's own clock (report time + S). Tests leave it at 0.
    p.add_argument("--freeze-after", type=float, default=0.0)
    args = p.parse_args()
    me = (os.environ["TONY_ROLE"], int(os.environ["TONY_TASK_INDEX"]))
    chosen = me == (args.role, args.index)

    if args.mode == "tfconfig":
        raw = os.environ.get("TF_CONFIG")
        cfg = json.loads(raw) if raw else None
        progress.report(
            step=1,
            tf_config=json.dumps(cfg, sort_keys=True),
            cuda=os.environ.get("CUDA_VISIBLE_DEVICES"),
            task_id=os.environ["TONY_TASK_ID"],
            cluster_spec=os.environ["TONY_CLUSTER_SPEC"],
        )
        return 0
    if args.mode == "ok":
        progress.report(step=1, prefix=sys.prefix)
        return 0
    if not chosen:
        time.sleep(args.seconds)
        return 0
    if args.mode == "exit":
        print(f"behave: {os.environ['TONY_TASK_ID']} giving up with code {args.code}", file=sys.stderr, flush=True)
        return args.code
    if args.mode in ("stop-executor", "kill-executor"):
        progress.report(step=1)
        if args.freeze_after > 0:
            time.sleep(args.freeze_after)  # the scenario's delay (bench), not a synchronisation
        # No wait for a heartbeat first: the AM times the silence of a registered task as of a
        # running one (JobTracker._mark_silent), so freezing at once is caught the same way.
        # SIGSTOP: the task executor freezes; SIGKILL: it dies. This process lives on.
        os.kill(os.getppid(), signal.SIGSTOP if args.mode == "stop-executor" else signal.SIGKILL)
        time.sleep(args.seconds)
        return 0
    if args.mode == "stall":
        for step in range(1, 4):
            progress.report(step=step)
            time.sleep(0.5)
        time.sleep(args.seconds)  # alive, heartbeating through the executor, but no progress
        return 0
    time.sleep(args.seconds)  # "sleep"
    return 0


if __name__ == "__main__":
    sys.exit(main())
