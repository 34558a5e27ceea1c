"""Record which GPUs and host this task got, then hold them until released.

    hold_gpus.py DIR [CODE]

Writes ``DIR/<app id>.<task id>.json`` with ``CUDA_VISIBLE_DEVICES``, the
NodeManager host and the node's GPU lease directory, then waits (bounded) for
``DIR/release`` and exits with CODE (default 0): the test reads every task's
record while all of them hold their GPUs at once. DIR is a local path: the
test cluster's NodeManagers share this machine.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from airflow_provider_tony.runtime.gpu_lease import lease_dir


def main() -> int:
    out = Path(sys.argv[1])
    record = {
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "host": os.environ.get("NM_HOST"),
        "task": os.environ["TONY_TASK_ID"],
        "app": os.environ["TONY_APPLICATION_ID"],
        "lease_dir": str(lease_dir(dict(os.environ), os.environ.get("NM_HOST", ""))),
    }
    tmp = out / f".{record['app']}.{record['task']}.tmp"
    tmp.write_text(json.dumps(record))
    tmp.rename(out / f"{record['app']}.{record['task']}.json")
    deadline = time.monotonic() + 300
    while not (out / "release").exists():
        if time.monotonic() > deadline:
            print("never released", file=sys.stderr)
            return 3
        time.sleep(0.2)
    return int(sys.argv[2]) if len(sys.argv) > 2 else 0


if __name__ == "__main__":
    sys.exit(main())
