"""A project run from ``src_dir``: imports its own package, reads a file by a relative path.

main.py EXPECTED_GREETING
"""

from __future__ import annotations

import json
import os
import sys

from pkg.util import greeting  # a package of the source tree

from airflow_provider_tony.runtime import progress


def main() -> int:
    with open("conf/settings.json") as fh:  # relative to the working directory
        settings = json.load(fh)
    text = greeting(settings["name"])
    if text != sys.argv[1]:
        print(f"expected {sys.argv[1]!r}, got {text!r}", file=sys.stderr)
        return 4
    open("written.txt", "w").write("private to this container")  # must not land in the shared tree
    progress.report(
        step=1, greeting=text, sys_path0=sys.path[0], cwd=os.getcwd(), ignored_shipped=os.path.exists("scratch.bin")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
