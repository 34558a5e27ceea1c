#!/usr/bin/env python3
"""Check on a machine with NVIDIA GPUs that TensorFlow sees exactly what the executor exposes.

For every split the AM could hand out on this node (two containers sharing
it, a container with all GPUs, a parameter server with none), build the
environment with the executor's own functions and ask a fresh TensorFlow
process which GPUs it sees. Prints one JSON line per case and exits 1 on
any mismatch.

    python scripts/gpu_check.py
"""
from __future__ import annotations

import json
import subprocess
import sys

from airflow_provider_tony.runtime.gpu import assign_gpus, discover_local_gpus, gpu_env

PROBE = ("import json, tensorflow as tf; "
         "print(json.dumps([d.name for d in tf.config.list_physical_devices('GPU')]))")


def tf_sees(env_update: dict[str, str]) -> list[str]:
    import os

    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env_update, "TF_CPP_MIN_LOG_LEVEL": "3"},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


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
            print(json.dumps({"case": name, "task": task_id, "CUDA_VISIBLE_DEVICES": gpu_env(devices)
                              ["CUDA_VISIBLE_DEVICES"], "tensorflow_sees": seen, "ok": good}))
        ok &= len(seen_all) == len(set(seen_all))  # disjoint
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
