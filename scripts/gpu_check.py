#!/usr/bin/env python3
"""Check on a machine with NVIDIA GPUs that TensorFlow sees exactly what the executor exposes.

For every split the AM could hand out on this node (two containers sharing
it, a container with all GPUs, a parameter server with none), build the
environment with the executor's own functions and ask a fresh TensorFlow
process which GPUs it sees. Prints one JSON line per case and exits 1 on
any mismatch.

The two-job case is what no single application master can guarantee: two
executors of *different* jobs on this node each take their GPUs through
the node-local leases (in separate processes, as two containers would), and
each one's TensorFlow must see its own GPUs only, with no GPU in both sets.

    python scripts/gpu_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

from airflow_provider_tony.runtime.gpu import assign_gpus, discover_local_gpus, gpu_env

PROBE = "import json, tensorflow as tf; print(json.dumps([d.name for d in tf.config.list_physical_devices('GPU')]))"


def tf_sees(env_update: dict[str, str]) -> list[str]:
    import os

    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **env_update, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


#: One "job": lease GPUs as the executor does, then ask TensorFlow, while
#: holding them, until the parent says stop (a line on stdin).
JOB = textwrap.dedent("""
    import json, subprocess, sys
    from pathlib import Path
    from airflow_provider_tony.runtime.gpu import discover_local_gpus, gpu_env
    from airflow_provider_tony.runtime.gpu_lease import GpuLeases
    leases = GpuLeases(Path(sys.argv[1]), "gpu_check job " + sys.argv[2])
    got = leases.acquire(discover_local_gpus(), int(sys.argv[3]), timeout=30)
    env = gpu_env(got)
    print(json.dumps({"job": sys.argv[2], "CUDA_VISIBLE_DEVICES": env["CUDA_VISIBLE_DEVICES"]}), flush=True)
    sys.stdin.readline()
""")


def two_jobs(gpus: list[str]) -> bool:
    """Two concurrent jobs on this node, each leasing half the GPUs in its own process."""
    if len(gpus) < 2:
        print(json.dumps({"case": "two jobs share the node", "skipped": "needs 2 or more GPUs"}))
        return True
    half = len(gpus) // 2
    with tempfile.TemporaryDirectory(prefix="tony-gpu-check-") as lease_dir:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", JOB, lease_dir, name, str(half)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
            for name in ("A", "B")
        ]
        try:
            grants = [json.loads(p.stdout.readline()) for p in procs if p.stdout is not None]
            ok = len(grants) == 2
            seen_all: list[str] = []
            for grant in grants:
                devices = [d for d in grant["CUDA_VISIBLE_DEVICES"].split(",") if d]
                seen = tf_sees(gpu_env(devices))  # while both jobs hold their leases
                good = len(seen) == len(devices) == half
                ok &= good
                seen_all += devices
                print(json.dumps({"case": "two jobs share the node", **grant, "tensorflow_sees": seen, "ok": good}))
            ok &= len(seen_all) == len(set(seen_all))  # disjoint across the jobs
        finally:
            for p in procs:
                if p.stdin is not None:
                    p.stdin.write("done\n")
                    p.stdin.close()
                p.wait(timeout=60)
    return ok


def main() -> int:
    gpus = discover_local_gpus()
    print(json.dumps({"node_gpus": gpus}))
    if not gpus:
        print("no NVIDIA GPU found (nvidia-smi): nothing to check", file=sys.stderr)
        return 2
    half = max(1, len(gpus) // 2)
    cases = {
        "two containers share the node": [("worker:0", "n", half), ("worker:1", "n", len(gpus) - half)],
        "one container takes all": [("worker:0", "n", len(gpus))],
        "ps without gpus": [("ps:0", "n", 0), ("worker:0", "n", 1)],
    }
    ok = True
    for name, requests in cases.items():
        grants = assign_gpus([r for r in requests if r[2] >= 0], {"n": gpus})
        seen_all: list[str] = []
        for task_id, devices in grants.items():
            seen = tf_sees(gpu_env(devices))
            good = len(seen) == len(devices)
            ok &= good
            seen_all += devices
            print(
                json.dumps(
                    {
                        "case": name,
                        "task": task_id,
                        "CUDA_VISIBLE_DEVICES": gpu_env(devices)["CUDA_VISIBLE_DEVICES"],
                        "tensorflow_sees": seen,
                        "ok": good,
                    }
                )
            )
        ok &= len(seen_all) == len(set(seen_all))  # disjoint
    ok &= two_jobs(gpus)
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
