"""A task that misbehaves on request, for the runtime's failure-policy tests.

    behave.py MODE [--index I] [--code C] [--seconds S] [--freeze-after S] [--target T]

Only the task whose TONY_TASK_INDEX equals --index misbehaves; the others
sleep until stopped (so that their siblings' fate is decided by the AM).
``blame`` exits 1 with the lines TensorFlow prints when a collective's peer
``--target`` (same role) went away, while that peer lives on.
``ok`` and ``tfconfig`` report and exit at once: the executor's exit record
carries the last progress to the AM, no heartbeat has to.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

from airflow_provider_tony.runtime import progress


def rendezvous() -> int:
    """What c10d's TCP store does with a PyTorch job's variables, without torch: rank 0 listens on
    MASTER_PORT, every other rank connects to MASTER_ADDR:MASTER_PORT and says its rank."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    seen = {rank}
    if rank == 0:
        with socket.create_server(("", port)) as server:
            server.settimeout(120)
            while len(seen) < world:
                conn, _ = server.accept()
                with conn:
                    seen.add(int(conn.makefile().readline()))
    else:
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection((addr, port), timeout=5) as conn:
                    conn.sendall(f"{rank}\n".encode())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # rank 0's process may not be listening yet: retried, as c10d does
    names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "INIT_METHOD", "WORLD")
    progress.report(
        step=1,
        env=json.dumps({n: os.environ.get(n) for n in names}),
        seen=json.dumps(sorted(seen)),
        tf_config=str("TF_CONFIG" in os.environ),
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument(
        "mode",
        choices=["ok", "exit", "blame", "stop-executor", "kill-executor", "stall", "sleep", "tfconfig", "rendezvous"],
    )
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--role", default="worker")
    p.add_argument("--code", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3600)
    p.add_argument("--target", type=int, default=0, help="blame: the index of the peer blamed")
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
    if args.mode == "rendezvous":
        return rendezvous()
    if args.mode == "ok":
        progress.report(step=1, prefix=sys.prefix)
        return 0
    if not chosen:
        time.sleep(args.seconds)
        return 0
    if args.mode == "exit":
        print(f"behave: {os.environ['TONY_TASK_ID']} giving up with code {args.code}", file=sys.stderr, flush=True)
        return args.code
    if args.mode == "blame":
        progress.report(step=1)
        peer = f"/job:{args.role}/replica:0/task:{args.target}"
        print(
            "UnavailableError: Collective ops is aborted by: failed to connect to all addresses; "
            f"Additional GRPC error information from remote target {peer}",
            file=sys.stderr,
            flush=True,
        )
        return 1
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
