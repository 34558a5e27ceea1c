"""The local cluster's layout: where everything lives, which ports and daemons, which profile.

Part of ``devcluster.py`` (see its docstring); standard library only.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import kdc

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
POM = HERE / "pom.xml"
CONF_TEMPLATES = HERE / "conf"
SECURE_FRAGMENTS = HERE / "conf-secure"
# Hadoop's and YARN's delegation tokens must be renewed this often (ms) on
# the secure profile: short, so that a test job outlives a renew interval.
TOKEN_RENEW_MS = int(os.environ.get("TONY_DEVCLUSTER_TOKEN_RENEW_MS", "60000"))
# ... and stop working this long after issue, however often renewed (dfs.namenode.delegation.token.
# max-lifetime; Hadoop's default, 7 days, unless set). `make test-secure` sets a few minutes, so a
# test job can outlive its first HDFS token (the AM's token refresh, kerberos.refresh_tokens).
TOKEN_MAX_LIFETIME_MS = int(os.environ.get("TONY_DEVCLUSTER_TOKEN_MAX_LIFETIME_MS", str(7 * 24 * 3600 * 1000)))

# Offsets from the port base; one place so that `env`, `status` and the
# configuration templates can never disagree.
PORT_OFFSETS = {
    "nn_rpc_port": 20,
    "nn_http_port": 70,
    "dn_port": 66,
    "dn_http_port": 64,
    "dn_ipc_port": 67,
    "rm_port": 32,
    "rm_scheduler_port": 30,
    "rm_tracker_port": 31,
    "rm_admin_port": 33,
    "rm_http_port": 88,
    "nm_port": 40,
    "nm_localizer_port": 41,
    "nm_http_port": 42,
    "nm_collector_port": 43,
    "nm_amrmproxy_port": 44,
    "kdc_port": 97,  # the secure profile's KDC only
    # The HA profile's second NameNode and ResourceManager, ZooKeeper, the JournalNode and the ZKFCs.
    "zk_port": 21,
    "nn2_rpc_port": 22,
    "jn_rpc_port": 23,
    "jn_http_port": 24,
    "zkfc1_port": 25,
    "zkfc2_port": 26,
    "nn2_http_port": 71,
    "rm2_scheduler_port": 34,
    "rm2_tracker_port": 35,
    "rm2_port": 36,
    "rm2_admin_port": 37,
    "rm2_http_port": 89,
    # The Kerberized HA profile's second HDFS (nameservice ``warehouse``): its own NameNode and DataNode.
    "wh_nn_rpc_port": 72,
    "wh_nn_http_port": 73,
    "wh_dn_port": 74,
    "wh_dn_http_port": 75,
    "wh_dn_ipc_port": 76,
}

# Hadoop 3.4 on Java 17 needs these (Hadoop's own scripts add them since
# HADOOP-19310); we start the JVMs ourselves, so we add them too. They are
# also handed to containers (skein's Java AM) through JDK_JAVA_OPTIONS.
ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.io",
        "java.lang",
        "java.lang.reflect",
        "java.math",
        "java.net",
        "java.nio",
        "java.text",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.zip",
        "sun.nio.ch",
        "sun.security.util",
        "sun.security.x509",
    )
] + ["--add-exports=java.base/sun.net.dns=ALL-UNNAMED", "--add-exports=java.base/sun.net.util=ALL-UNNAMED"]


#: NodeManager ``I`` uses these offsets plus ``NM_PORT_STRIDE * I``: NM 0 keeps
#: 40-44, NM 1 45-49, NM 2 50-54, NM 3 55-59 (64 and up belong to the DataNode).
NM_PORT_KEYS = ("nm_port", "nm_localizer_port", "nm_http_port", "nm_collector_port", "nm_amrmproxy_port")
NM_PORT_STRIDE = 5
MAX_NODEMANAGERS = 4
#: The node label the GPU NodeManager carries. Non-exclusive: containers that
#: ask for no label may use the node's spare room, as on a mixed cluster.
GPU_LABEL = "gpu"
NM_MAIN_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"


@dataclass(frozen=True)
class Daemon:
    name: str
    main_class: str
    heap_mb: int
    #: The NodeManager's index; None for the other daemons.
    node: int | None = None
    #: The HA profile's daemons that need their own id (``dfs.ha.namenode.id``,
    #: ``yarn.resourcemanager.ha.id``, ZooKeeper's zoo.cfg) read ``conf-<conf_sub>/``.
    conf_sub: str = ""
    #: Arguments after the main class (ZooKeeper's config file).
    args: tuple[str, ...] = ()


DAEMONS = (
    Daemon("namenode", "org.apache.hadoop.hdfs.server.namenode.NameNode", 384),
    Daemon("datanode", "org.apache.hadoop.hdfs.server.datanode.DataNode", 256),
    Daemon("resourcemanager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", 512),
    Daemon("nodemanager", NM_MAIN_CLASS, 384, node=0),
)


SECURE_MARKER = "secure-profile"
#: Left in a home that ``up`` started with the HA profile (``TONY_DEVCLUSTER_HA=1``).
HA_MARKER = "ha-profile"
#: The HA profile's port base when ``TONY_DEVCLUSTER_PORT_BASE`` is unset (the Makefile's is base + 1200).
HA_DEFAULT_PORT_BASE = 20200
SECURE_HA_DEFAULT_PORT_BASE = 20500  # the Kerberized HA profile's (the Makefile's is base + 1500)


def choose_profile(env: Mapping[str, str], repo: Path, command: str) -> tuple[Path, bool]:
    """The home and whether it runs the secure profile; each profile keeps its own default home.

    ``TONY_DEVCLUSTER_SECURE`` asks for the secure profile; without ``TONY_DEVCLUSTER_HOME`` it
    lives in ``.devcluster-secure/`` and the open one in ``.devcluster/``, so trying the secure
    profile once never turns a later plain ``up`` (or ``make demo``) Kerberized. A home started
    secure keeps its marker: ``env``, ``status`` and ``down`` read it (they describe the home as it
    is), but a plain ``up`` of a marked home is refused with the two ways out rather than quietly
    bringing back a cluster that answers plain HTTP with 401.
    """
    requested = env.get("TONY_DEVCLUSTER_SECURE", "").lower() in ("1", "true", "yes")
    default = repo / (".devcluster-secure" if requested else ".devcluster")
    home = Path(env.get("TONY_DEVCLUSTER_HOME", default)).resolve()
    marked = (home / SECURE_MARKER).exists()
    if command == "up" and marked and not requested:
        if "TONY_DEVCLUSTER_HOME" not in env:
            # The open profile's default home, made secure before each profile had its own.
            raise ClusterError(
                f"{home} was started with the secure profile before that profile got its own home "
                f"(.devcluster-secure): run `make cluster-down`, remove {home / 'data'}, {home / 'krb5'} "
                f"and {home / SECURE_MARKER} (the jar cache stays), then `make cluster-up` again"
            )
        raise ClusterError(
            f"{home} holds a secure (Kerberized) cluster: start it with TONY_DEVCLUSTER_SECURE=1 "
            "(make cluster-up SECURE=1), or give the open cluster another TONY_DEVCLUSTER_HOME "
            f"(or remove {home} after `down`)"
        )
    return home, requested or marked


#: The HA profile's daemons, in start order: ZooKeeper and the JournalNode first (the NameNodes
#: write their edits there, the ZKFCs and RMs elect through ZooKeeper), then HDFS, then YARN.
#: Heaps are small: ten JVMs share a developer's machine.
HA_DAEMONS = (
    Daemon("zookeeper", "org.apache.zookeeper.server.ZooKeeperServerMain", 64, conf_sub="zk", args=("{conf}/zoo.cfg",)),
    Daemon("journalnode", "org.apache.hadoop.hdfs.qjournal.server.JournalNode", 128),
    Daemon("namenode-nn1", "org.apache.hadoop.hdfs.server.namenode.NameNode", 256, conf_sub="nn1"),
    Daemon("namenode-nn2", "org.apache.hadoop.hdfs.server.namenode.NameNode", 256, conf_sub="nn2"),
    Daemon("zkfc-nn1", "org.apache.hadoop.hdfs.tools.DFSZKFailoverController", 64, conf_sub="nn1"),
    Daemon("zkfc-nn2", "org.apache.hadoop.hdfs.tools.DFSZKFailoverController", 64, conf_sub="nn2"),
    Daemon("datanode", "org.apache.hadoop.hdfs.server.datanode.DataNode", 192),
    Daemon("resourcemanager-rm1", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", 384, conf_sub="rm1"),
    Daemon("resourcemanager-rm2", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", 384, conf_sub="rm2"),
    Daemon("nodemanager", "org.apache.hadoop.yarn.server.nodemanager.NodeManager", 384, node=0),
)
#: The Kerberized HA profile's second HDFS (nameservice ``warehouse``): data on another NameNode.
WAREHOUSE_DAEMONS = (
    Daemon("namenode-warehouse", "org.apache.hadoop.hdfs.server.namenode.NameNode", 256, conf_sub="warehouse"),
    Daemon("datanode-warehouse", "org.apache.hadoop.hdfs.server.datanode.DataNode", 192, conf_sub="warehouse"),
)


def nodemanager(index: int) -> Daemon:
    """NodeManager ``index``; 0 keeps the single-node cluster's name."""
    return Daemon("nodemanager" if index == 0 else f"nodemanager-{index}", NM_MAIN_CLASS, 384, node=index)


class ClusterError(RuntimeError):
    """A daemon did not come up, or a prerequisite is missing."""


@dataclass(frozen=True)
class Layout:
    """Where everything lives and which ports are used, from the environment."""

    home: Path
    port_base: int
    nm_memory_mb: int
    nm_vcores: int
    nodemanagers: int = 1
    gpus: int = 4
    #: How long the RM waits for a silent NodeManager before calling it LOST.
    nm_expiry_ms: int = 60000
    secure: bool = False
    #: The capacity scheduler's preemption monitor (``TONY_DEVCLUSTER_PREEMPTION``, on by default).
    preemption: bool = True
    #: The HA profile (``dc_ha.py``): ZooKeeper, two RMs, two NameNodes of one nameservice.
    ha: bool = False

    @classmethod
    def from_env(cls, command: str = "status") -> Layout:
        env = dict(os.environ)
        ha_requested = _truthy(env.get("TONY_DEVCLUSTER_HA", ""))
        secure_requested = _truthy(env.get("TONY_DEVCLUSTER_SECURE", ""))
        if ha_requested and "TONY_DEVCLUSTER_HOME" not in env:
            env["TONY_DEVCLUSTER_HOME"] = str(
                REPO / (".devcluster-ha-secure" if secure_requested else ".devcluster-ha")
            )
        home, secure = choose_profile(env, REPO, command)
        ha_marked = (home / HA_MARKER).exists()
        if command == "up" and ha_marked and not ha_requested:
            raise ClusterError(
                f"{home} holds an HA cluster: start it with TONY_DEVCLUSTER_HA=1 (make cluster-up HA=1), "
                f"or give the other cluster another TONY_DEVCLUSTER_HOME (or remove {home} after `down`)"
            )
        ha = ha_requested or ha_marked
        default_base = str(SECURE_HA_DEFAULT_PORT_BASE if secure else HA_DEFAULT_PORT_BASE) if ha else "19000"
        layout = cls(
            home=home,
            port_base=int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", default_base)),
            nm_memory_mb=int(os.environ.get("TONY_DEVCLUSTER_NM_MEMORY_MB", "14336")),
            nm_vcores=int(os.environ.get("TONY_DEVCLUSTER_NM_VCORES", "16")),
            nodemanagers=_int_env("TONY_DEVCLUSTER_NODEMANAGERS", "1"),
            gpus=_int_env("TONY_DEVCLUSTER_GPUS", "4"),
            nm_expiry_ms=_int_env("TONY_DEVCLUSTER_NM_EXPIRY_MS", "60000"),
            secure=secure,
            preemption=os.environ.get("TONY_DEVCLUSTER_PREEMPTION", "1").lower() not in ("0", "false", "no"),
            ha=ha,
        )
        if layout.ha and layout.nodemanagers != 1:
            raise ClusterError(
                f"TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers} with the HA profile: "
                "the HA cluster runs one NodeManager; unset one of the two"
            )
        if not 1 <= layout.nodemanagers <= MAX_NODEMANAGERS:
            raise ClusterError(
                f"TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers}: the port layout "
                f"has room for 1 to {MAX_NODEMANAGERS} NodeManagers; pick one of those"
            )
        if not 0 <= layout.gpus <= 64:
            raise ClusterError(f"TONY_DEVCLUSTER_GPUS={layout.gpus}: give 0 to 64 stand-in GPUs")
        if layout.nm_expiry_ms < 1000:
            raise ClusterError(
                f"TONY_DEVCLUSTER_NM_EXPIRY_MS={layout.nm_expiry_ms}: give at least 1000 ms "
                "(NodeManagers heartbeat every 250 ms; a shorter expiry loses healthy nodes)"
            )
        if layout.secure and layout.multi_node:
            # One NodeManager principal and keytab per host would be needed;
            # the secure profile is about credentials, not placement.
            raise ClusterError(
                f"TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers} with the secure profile: "
                "the secure cluster runs one NodeManager; unset one of the two"
            )
        return layout

    @property
    def multi_node(self) -> bool:
        return self.nodemanagers > 1

    @property
    def gpu_node(self) -> int | None:
        """The NodeManager with the ``gpu`` label and the GPUs (the last one), if any."""
        return self.nodemanagers - 1 if self.multi_node else None

    @property
    def daemons(self) -> tuple[Daemon, ...]:
        if self.ha:
            return HA_DAEMONS + (WAREHOUSE_DAEMONS if self.secure else ())
        return DAEMONS + tuple(nodemanager(i) for i in range(1, self.nodemanagers))

    def nm_host(self, index: int) -> str:
        # Distinct loopback addresses make distinct YARN hosts: Linux answers
        # on all of 127.0.0.0/8 without configuration.
        return "localhost" if index == 0 else f"127.0.0.{index + 1}"

    def nm_port(self, key: str, index: int) -> int:
        return self.port(key) + NM_PORT_STRIDE * index

    def nm_id(self, index: int) -> str:
        """The YARN node id (``host:port``) of NodeManager ``index``."""
        return f"{self.nm_host(index)}:{self.nm_port('nm_port', index)}"

    def nm_home(self, index: int) -> Path:
        return self.home if index == 0 else self.home / f"nm{index}"

    def nm_conf(self, index: int) -> Path:
        return self.conf if index == 0 else self.nm_home(index) / "conf"

    def nm_local_dir(self, index: int) -> Path:
        return self.home / "data" / ("nm-local" if index == 0 else f"nm-local-{index}")

    def nm_log_dir(self, index: int) -> Path:
        return self.logs / ("containers" if index == 0 else f"containers-{index}")

    def nm_gpu_bin(self, index: int) -> Path:
        """Where the stand-in ``nvidia-smi`` of a GPU NodeManager lives."""
        return self.nm_home(index) / "gpu-bin"

    def nm_gpu_leases(self, index: int) -> Path:
        """Where the executors on a GPU NodeManager lease its stand-in GPUs (``TONY_GPU_LEASE_DIR``)."""
        return self.nm_home(index) / "gpu-leases"

    def nm_url_of(self, index: int) -> str:
        return f"http://{self.nm_host(index)}:{self.nm_port('nm_http_port', index)}"

    def daemon_conf(self, daemon: Daemon) -> Path:
        if daemon.conf_sub:
            return self.home / f"conf-{daemon.conf_sub}"
        return self.nm_conf(daemon.node) if daemon.node else self.conf

    def daemon_classpath(self, daemon: Daemon) -> str:
        return f"{self.daemon_conf(daemon)}:{self.webapps}:{self.jars}/*"

    @property
    def jars(self) -> Path:
        # Overridable so that a second cluster (e.g. the lifecycle test's) can
        # share the jar cache of the first instead of downloading again.
        return Path(os.environ.get("TONY_DEVCLUSTER_JARS", self.home / "jars")).resolve()

    @property
    def native_dir(self) -> Path:
        """Hadoop's native library, beside the jars so that a shared jar cache carries it."""
        return self.jars / "_native"

    @property
    def webapps(self) -> Path:
        # Beside the jars (not in home) so that a shared jar cache carries it.
        return self.jars / "_webapps"

    @property
    def classpath(self) -> str:
        return f"{self.conf}:{self.webapps}:{self.jars}/*"

    @property
    def realm(self) -> kdc.Realm:
        return kdc.Realm(dir=self.home / "krb5", port=self.port("kdc_port"), user=getpass.getuser())

    @property
    def conf(self) -> Path:
        return self.home / "conf"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def skein(self) -> Path:
        return self.home / "skein"

    def port(self, key: str) -> int:
        return self.port_base + PORT_OFFSETS[key]

    @property
    def webhdfs_url(self) -> str:
        return f"http://localhost:{self.port('nn_http_port')}"

    @property
    def rm_url(self) -> str:
        return f"http://127.0.0.1:{self.port('rm_http_port')}"

    @property
    def nm_url(self) -> str:
        return f"http://localhost:{self.port('nm_http_port')}"

    @property
    def fs_default(self) -> str:
        return f"hdfs://127.0.0.1:{self.port('nn_rpc_port')}"


def _truthy(raw: str) -> bool:
    return raw.lower() in ("1", "true", "yes")


def _int_env(name: str, default: str) -> int:
    raw = os.environ.get(name, default)
    try:
        return int(raw)
    except ValueError:
        raise ClusterError(f"{name}={raw!r} is not a whole number; set it to one, e.g. {default}") from None
