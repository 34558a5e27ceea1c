"""Report this task's argv and what a hostile param could have changed, then exit 0 (issue 35, point 3).

    echo_argv.py ARG...

No TensorFlow: the test is about what reaches the task, not about training.
"""

from __future__ import annotations

import json
import os
import sys

from airflow_provider_tony.runtime import progress


def main() -> int:
    progress.report(
        step=1,
        argv=json.dumps(sys.argv[1:]),
        skein_py=str(os.path.exists("skein.py")),
        archive=str(os.path.exists("environment")),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
