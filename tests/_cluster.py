"""The local cluster's environment, exported only for the tests that use the cluster.

``devcluster.py env`` runs when an integration or e2e test directory is collected
(their conftest calls ``export_cluster_env``), never for the unit tests. It needs no
JDK (without one it only leaves ``JAVA_HOME`` out), so a unit test that runs pytest on
an integration module (``test_must_run``) works on a machine without Java or a cluster:
``make test-fast`` there is ``python3 scripts/without_jdk.py make test-fast``.
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

#: The chaos and multi-node tests' cluster: four NodeManagers (three unlabelled
#: for the spread workers, the last one labelled ``gpu`` with the stand-in GPUs),
#: its own state dir and a port base this far above the open cluster's. One cluster uses ports
#: base+20 to base+97 and the Airflow stack base+380 and base+432; the secure
#: cluster sits at base+600 (the Makefile), so the three ranges never overlap.
CHAOS_NODEMANAGERS = 4
CHAOS_PORT_OFFSET = 900
DEFAULT_PORT_BASE = 19000


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


def use_chaos_cluster() -> None:
    """Point this process (and what it starts) at the chaos cluster, never at the shared one.

    The variables are forced, not defaulted: a shell that exported the shared
    cluster's ``TONY_DEVCLUSTER_HOME`` must not point fault tests at it.
    ``TONY_CHAOS_HOME`` and ``TONY_CHAOS_PORT_BASE`` override the state dir and
    the port base; the Hadoop jars are the default cluster's cache (read only).
    Call it before ``export_cluster_env``.
    """
    default_home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster"))
    os.environ.setdefault("TONY_DEVCLUSTER_JARS", str(default_home / "jars"))
    open_base = int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", str(DEFAULT_PORT_BASE)))
    os.environ["TONY_DEVCLUSTER_HOME"] = os.environ.get("TONY_CHAOS_HOME", str(REPO / ".devcluster-chaos"))
    os.environ["TONY_DEVCLUSTER_PORT_BASE"] = os.environ.get("TONY_CHAOS_PORT_BASE", str(open_base + CHAOS_PORT_OFFSET))
    os.environ["TONY_DEVCLUSTER_NODEMANAGERS"] = str(CHAOS_NODEMANAGERS)
    os.environ.setdefault("TONY_DEVCLUSTER_NM_MEMORY_MB", "8192")


def devcluster(*args: str, timeout: float = 300) -> None:
    """Run ``devcluster.py ARGS`` against this process's cluster; raise with its stderr if it fails."""
    proc = subprocess.run([sys.executable, str(DEVCLUSTER), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"devcluster {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def node_index(host: str) -> int:
    """devcluster's NodeManager I listens on localhost (0) or 127.0.0.<I+1>."""
    return 0 if host == "localhost" else int(host.rsplit(".", 1)[1]) - 1


# test_two_clusters' second cluster, 800 above the open cluster's base: clear of the secure (+600) and
# chaos (+900) clusters' ports.
SECOND_PORT_BASE = str(int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", DEFAULT_PORT_BASE)) + 800)
