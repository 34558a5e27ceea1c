"""Which cluster a skein driver talks to, when one process follows jobs on several.

The skein driver (a JVM) learns its cluster from the environment it starts
in: ``HADOOP_CONF_DIR`` and ``yarn classpath`` (found on ``PATH``) name the
ResourceManager, ``JAVA_HOME`` the JDK. skein itself reads ``SKEIN_CONFIG``
once, at import, for its TLS credentials. A triggerer following jobs on two
``tony_yarn`` connections therefore cannot set these process-wide and hope:
the second connection would re-point the first's next driver, and both
would share one credentials folder.

So each ``TonyClient`` carries its own ``ClusterEnv``; its driver starts
inside ``driver_environment`` (the variables set under one process-wide lock
and restored at once, so drivers start one at a time, each in its own
cluster's environment), with ``Security`` read from the connection's own
skein config folder rather than the one skein read at import.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterEnv", "driver_environment", "security_for"]

# One driver starts at a time in this process: its environment is the process's.
_START_LOCK = threading.Lock()


@dataclass(frozen=True)
class ClusterEnv:
    """One cluster's client-side settings; None means "as this process's environment says"."""

    hadoop_conf_dir: str | None = None
    java_home: str | None = None
    yarn_bin_dir: str | None = None  # where the cluster's `yarn` command lives (skein's classpath lookup)
    skein_config: str | None = None  # skein's credentials folder (SKEIN_CONFIG)

    def conf_dir(self) -> str | None:
        """The Hadoop conf dir to read site files from."""
        return self.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")

    def overrides(self) -> dict[str, str]:
        """The variables a driver of this cluster starts with, over the process's own."""
        env = {}
        if self.hadoop_conf_dir:
            env["HADOOP_CONF_DIR"] = self.hadoop_conf_dir
        if self.java_home:
            env["JAVA_HOME"] = self.java_home
        if self.yarn_bin_dir:
            env["PATH"] = f"{self.yarn_bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        if self.skein_config:
            env["SKEIN_CONFIG"] = self.skein_config
        return env


@contextmanager
def driver_environment(cluster: ClusterEnv) -> Iterator[None]:
    """The process environment set for ``cluster`` while a driver starts, then restored."""
    with _START_LOCK:
        changes = cluster.overrides()
        saved = {key: os.environ.get(key) for key in changes}
        os.environ.update(changes)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def security_for(cluster: ClusterEnv) -> Any:
    """skein credentials from the cluster's own config folder (made there on first use); None: skein's default."""
    if not cluster.skein_config:
        return None
    import skein

    try:
        return skein.Security.from_directory(cluster.skein_config)
    except FileNotFoundError:
        pass
    try:
        return skein.Security.new_credentials().to_directory(cluster.skein_config)
    except FileExistsError:  # another process wrote them first: use theirs
        return skein.Security.from_directory(cluster.skein_config)
