"""A task that holds more memory than its container asks for, for the memory-kill tests.

    hog.py [--index I] [--mib M] [--seconds S]

The task whose TONY_TASK_INDEX equals --index touches M MiB (resident, one
byte per page written) and holds it S seconds, then exits 0; the others report
a step and wait S seconds too. Plain Python: what is measured is YARN's
enforcement of the request, not TensorFlow's footprint.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from airflow_provider_tony.runtime import progress

PAGE = 4096


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--mib", type=int, default=900)
    p.add_argument("--seconds", type=float, default=15.0)
    args = p.parse_args()
    index = int(os.environ["TONY_TASK_INDEX"])
    progress.report(step=1)
    held = bytearray()
    if index == args.index:
        held = bytearray(args.mib * 1024 * 1024)
        for offset in range(0, len(held), PAGE):  # bytearray() maps zero pages: write each one
            held[offset] = 1
        print(f"hog: {os.environ['TONY_TASK_ID']} holds {args.mib} MiB", file=sys.stderr, flush=True)
    time.sleep(args.seconds)
    progress.report(step=2, held_mib=len(held) // (1024 * 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
