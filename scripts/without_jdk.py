#!/usr/bin/env python3
"""Run a command as a machine without a JDK sees it: ``python3 scripts/without_jdk.py make test-fast``.

Why: ``make test-fast`` promises "no cluster, no Java", and only running it with no JDK
visible shows that promise holds. The command runs with ``JAVA_HOME`` unset, every ``PATH``
folder holding a ``java`` dropped (``/usr/bin`` stays, shadowed by a tripwire ``java`` that
records its caller and fails) and, where the kernel lets root make a private mount namespace,
an empty tmpfs over ``/usr/lib/jvm`` (``devcluster/airflow_stack.py``'s ``without_java`` and
``hide_jdks_prefix``, the ones the CLI tests use). The exit code is the command's; it is 3 when
the command passed but something tried to run ``java``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "devcluster"))

import airflow_stack  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: without_jdk.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tony-no-jdk-") as tripwire:
        env = airflow_stack.without_java(dict(os.environ), Path(tripwire))
        prefix = airflow_stack.hide_jdks_prefix()
        hidden = "/usr/lib/jvm hidden (empty tmpfs)" if prefix else "/usr/lib/jvm visible (no private mount here)"
        print(f"without_jdk: no JAVA_HOME, no java on PATH, {hidden}", file=sys.stderr)
        rc = subprocess.run([*prefix, *argv], env=env, check=False).returncode
        calls = airflow_stack.java_calls(Path(tripwire))
    if calls:
        print(f"without_jdk: something tried to run java:\n{calls}", file=sys.stderr)
        return rc or 3
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
