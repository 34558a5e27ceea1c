"""Which cluster a ``TonyClient`` talks to, when one process follows jobs on several.

Submitting is HTTP (yarn/submit.py): nothing is read from the process
environment at submit time but the Hadoop configuration folder (its
``*-site.xml`` name the ResourceManager, ``fs.defaultFS``, the application
class path and, on a Kerberized cluster, the RM's principal). A triggerer
following jobs on two ``tony_yarn`` connections therefore keeps each
connection's folder with its own client instead of one ``HADOOP_CONF_DIR``
for the process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterEnv", "security_for"]


@dataclass(frozen=True)
class ClusterEnv:
    """One cluster's client-side settings; None means "as this process's environment says"."""

    hadoop_conf_dir: str | None = None
    skein_config: str | None = None  # a folder of TLS credentials for skein's AMs; None: fresh ones per job

    def conf_dir(self) -> str | None:
        """The Hadoop conf dir to read site files from."""
        return self.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")


def security_for(cluster: ClusterEnv) -> Any:
    """skein credentials from the cluster's own config folder (made there on first use); None: fresh per job."""
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
