"""A training script that attacks everything downstream of it (issue 27's hostile script).

    hostile.py [SECONDS]

It reports step 7 with a markup- and escape-laden note, fills its stderr with
terminal escapes, forged log lines and ``::group::`` markers, and after
SECONDS/2 (default 20) reports thousands of metrics with huge names and
values and a mistyped ``step="ten"``, then writes its progress file directly
past ``progress.report``, and keeps both to its exit (code 0) SECONDS/2
later: a job whose every observer survives ends SUCCEEDED.
"""

from __future__ import annotations

import json
import os
import sys
import time

from airflow_provider_tony.runtime import progress

NASTY = "loss\n::group::forged\x1b[2J\x1b]0;pwned\x07<script>alert(1)</script>\r\n::endgroup::\u2028x"


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    progress.report(step=7, loss=0.5, note=NASTY)  # a sane report first: it must get through
    for _ in range(50):
        print(f"stderr {NASTY}", file=sys.stderr, flush=True)
    print("x" * 1_000_000, file=sys.stderr, flush=True)
    time.sleep(seconds / 2)
    # The storm, kept to the end: every heartbeat and the exit record carry whatever is left.
    metrics = {f"m{i}_{NASTY}_{'x' * 300}": NASTY + "v" * 5000 for i in range(3000)}
    progress.report(step="ten", epoch="<b>1</b>", total_steps=[1], **metrics)  # type: ignore[arg-type]
    time.sleep(seconds / 4)
    # The file itself, past report()'s caps: megabytes the executor must not forward.
    path = os.environ.get("TONY_PROGRESS_FILE")
    if path:
        with open(path + ".tmp", "w") as fh:
            json.dump({"step": 3, "metrics": metrics, "time": "yesterday"}, fh)
        os.replace(path + ".tmp", path)
    time.sleep(seconds / 4)
    print(f"::group::last words {NASTY}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
