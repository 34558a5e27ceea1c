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
    skein_config: str | None = None  # a folder of TLS credentials for skein's AMs; None: skein's own (~/.skein)

    def conf_dir(self) -> str | None:
        """The Hadoop conf dir to read site files from."""
        return self.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")


def security_for(cluster: ClusterEnv) -> Any:
    """The TLS credentials skein's AMs serve with: from the connection's folder, else skein's own (``~/.skein``).

    Made there on first use (an RSA key takes about a second to generate:
    too long to pay on every submit), as skein's driver did.
    """
    import skein
    from skein.core import properties

    folder = cluster.skein_config or properties.config_dir
    try:
        return skein.Security.from_directory(folder)
    except FileNotFoundError:
        pass
    try:
        return skein.Security.new_credentials().to_directory(folder)
    except FileExistsError:  # another process wrote them first: use theirs
        return skein.Security.from_directory(folder)
