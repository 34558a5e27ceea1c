"""The local cluster's environment, exported only for the tests that use the cluster.

``devcluster.py env`` needs Java (it names the JDK in JAVA_HOME), so it runs
when an integration or e2e test directory is collected (their conftest calls
``export_cluster_env``), never for the unit tests: ``make test-fast`` works on a
machine without Java or a cluster.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEVCLUSTER = REPO / "devcluster" / "devcluster.py"


def _parse_exports(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("export "):
            continue
        name, _, value = line[len("export ") :].partition("=")
        if name == "PATH":
            # `export PATH=<shim dir>:"$PATH"`: keep the shim dir, expand the rest.
            env["PATH"] = shlex.split(value.replace('"$PATH"', ""))[0] + os.environ.get("PATH", "")
        else:
            env[name] = shlex.split(value)[0]
    return env


@functools.cache
def export_cluster_env() -> dict[str, str]:
    """Put the cluster's variables into ``os.environ`` (once) and return them.

    Called before any test module imports skein: skein reads SKEIN_CONFIG at
    import time, and the provider reads the AIRFLOW_CONN_* connection.
    """
    out = subprocess.run([sys.executable, str(DEVCLUSTER), "env"], capture_output=True, text=True, check=True).stdout
    env = _parse_exports(out)
    os.environ.update(env)
    return env
