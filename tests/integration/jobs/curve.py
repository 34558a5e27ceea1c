"""A task that reports a falling loss and a rising accuracy, step by step, for the job page's tests.

curve.py STEPS SECONDS_PER_STEP


"""

from __future__ import annotations

import sys
import time

from airflow_provider_tony.runtime import progress


def main() -> int:
    steps, pause = int(sys.argv[1]), float(sys.argv[2])
    for step in range(1, steps + 1):
        progress.report(step=step, epoch=(step - 1) // 5, total_steps=steps, loss=2.0 / step, accuracy=1.0 - 0.5 / step)
        time.sleep(pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
