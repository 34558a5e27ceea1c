"""The HA profile (``TONY_DEVCLUSTER_HA=1``): a local cluster laid out as production HA clusters are.

Part of ``devcluster.py``; standard library only. Why it exists: the provider's failover
(``yarn/failover.py``, the runtime's WebHDFS) can only be shown to work against the real thing, a
standby that answers as standbys do and an election that really moves. The profile runs

- ZooKeeper standalone (the RMs' leader election and state store, the ZKFCs' election);
- one JournalNode holding the shared edits of nameservice ``tony``;
- NameNodes ``nn1`` and ``nn2`` of ``tony``, each with its ZKFC (automatic failover,
  ``shell(/bin/true)`` fencing: both NameNodes are on this machine and share nothing but the
  JournalNode, which already refuses a second writer);
- one DataNode reporting to both;
- ResourceManagers ``rm1`` and ``rm2`` with the embedded elector, the ZooKeeper state store and
  work-preserving recovery (a new active RM takes the running containers back);
- one NodeManager, configured with both RMs.

The shared configuration (``conf/``, what ``env`` exports as ``HADOOP_CONF_DIR`` and what
containers read) is written the way HA clusters write it: ``fs.defaultFS`` is ``hdfs://tony``, and
there is no plain RM or NameNode address at all, only per-id ones. Each NameNode/ZKFC pair and each
RM reads a copy with its own id (``conf-nn1/``, ``conf-rm2/``...): on one host Hadoop cannot tell
the ids apart by address.

``failover rm|nn`` SIGKILLs the active one (``--graceful``: SIGTERM) and waits until the other is
active; ``active rm|nn`` prints the active id; ``up`` starts whatever is down again (a killed RM or
NameNode comes back as the standby).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from dc_configs import fetch_jars, fetch_native, render_conf
from dc_ha_state import (
    NAMESERVICE,
    NN_IDS,
    NN_PORTS,
    RM_IDS,
    RM_PORTS,
    WAREHOUSE,
    hdfs_ha_ready,
    jn_ready,
    nn_state,
    warehouse_ready,
    yarn_ha_ready,
    zk_ready,
)
from dc_kerberos import start_kdc
from dc_layout import CONF_TEMPLATES, HA_MARKER, ClusterError, Daemon, Layout
from dc_processes import daemon_env, java_home, running_pid, start_daemon
from dc_readiness import wait_for

# The single-RM/NameNode keys the templates write; an HA conf names every daemon by its id instead.
_STRIP = {
    "core-site.xml": ("fs.defaultFS",),
    "hdfs-site.xml": ("dfs.namenode.rpc-address", "dfs.namenode.http-address", "dfs.namenode.name.dir"),
    "yarn-site.xml": (
        "yarn.resourcemanager.hostname",
        "yarn.resourcemanager.address",
        "yarn.resourcemanager.scheduler.address",
        "yarn.resourcemanager.resource-tracker.address",
        "yarn.resourcemanager.admin.address",
        "yarn.resourcemanager.webapp.address",
        "yarn.resourcemanager.recovery.enabled",
    ),
}
ZK_FORMATTED = "zkfc-formatted"
NN_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
# ---------------------------------------------------------------- conf


def _prop(name: str, value: str) -> str:
    return f"  <property><name>{name}</name><value>{value}</value></property>\n"


def _strip(text: str, keys: tuple[str, ...]) -> str:
    for key in keys:
        text = re.sub(rf"^\s*<property><name>{re.escape(key)}</name>.*\n", "", text, flags=re.M)
    return text


def _append(path: Path, props: dict[str, str]) -> None:
    text = path.read_text()
    path.write_text(
        text.replace("</configuration>", "".join(_prop(k, v) for k, v in props.items()) + "</configuration>")
    )


def ha_properties(layout: Layout) -> dict[str, dict[str, str]]:
    """What the HA profile adds to each shared site file (every daemon's and client's view)."""
    zk = f"127.0.0.1:{layout.port('zk_port')}"
    core = {
        "fs.defaultFS": f"hdfs://{NAMESERVICE}",
        "ha.zookeeper.quorum": zk,
        "hadoop.zk.address": zk,
        "ha.zookeeper.session-timeout.ms": "5000",
        "hadoop.zk.timeout-ms": "5000",
        # A killed NameNode refuses at once; a client must not sit out Hadoop's ten retries.
        "ipc.client.connect.max.retries": "2",
        "ipc.client.connect.retry.interval": "500",
    }
    ns = NAMESERVICE
    hdfs = {
        "dfs.nameservices": ns,
        f"dfs.ha.namenodes.{ns}": ",".join(NN_IDS),
        "dfs.namenode.shared.edits.dir": f"qjournal://127.0.0.1:{layout.port('jn_rpc_port')}/{ns}",
        "dfs.journalnode.edits.dir": str(layout.home / "data" / "journal"),
        "dfs.journalnode.rpc-address": f"127.0.0.1:{layout.port('jn_rpc_port')}",
        "dfs.journalnode.http-address": f"127.0.0.1:{layout.port('jn_http_port')}",
        f"dfs.client.failover.proxy.provider.{ns}": (
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"
        ),
        "dfs.ha.automatic-failover.enabled": "true",
        # Fencing: the JournalNode already refuses the old active's edits (its epoch is stale).
        "dfs.ha.fencing.methods": "shell(/bin/true)",
        # The standby reads the JournalNode's edits every second, so a failover has little to catch up.
        "dfs.ha.tail-edits.period": "1",
    }
    for nn in NN_IDS:
        rpc, http, _zkfc = NN_PORTS[nn]
        hdfs[f"dfs.namenode.rpc-address.{ns}.{nn}"] = f"127.0.0.1:{layout.port(rpc)}"
        hdfs[f"dfs.namenode.http-address.{ns}.{nn}"] = f"127.0.0.1:{layout.port(http)}"
    yarn = {
        "yarn.resourcemanager.ha.enabled": "true",
        "yarn.resourcemanager.ha.rm-ids": ",".join(RM_IDS),
        "yarn.resourcemanager.cluster-id": "tony-ha",
        "yarn.resourcemanager.ha.automatic-failover.enabled": "true",
        "yarn.resourcemanager.ha.automatic-failover.embedded": "true",
        "yarn.resourcemanager.recovery.enabled": "true",
        "yarn.resourcemanager.work-preserving-recovery.enabled": "true",
        "yarn.resourcemanager.work-preserving-recovery.scheduling-wait-ms": "2000",
        "yarn.resourcemanager.store.class": "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore",
        "yarn.resourcemanager.zk-timeout-ms": "5000",
        # The NodeManager's and the AMs' RM proxies fail over within seconds, not Hadoop's 30 s steps.
        "yarn.resourcemanager.connect.retry-interval.ms": "1000",
        "yarn.client.failover-sleep-base-ms": "200",
        "yarn.client.failover-sleep-max-ms": "2000",
    }
    for rm in RM_IDS:
        yarn[f"yarn.resourcemanager.hostname.{rm}"] = "127.0.0.1"
        for key, port in RM_PORTS[rm].items():
            yarn[f"yarn.resourcemanager.{key}.{rm}"] = f"127.0.0.1:{layout.port(port)}"
    if layout.secure:
        hdfs.update(_secure_hdfs_properties(layout))
    return {"core-site.xml": core, "hdfs-site.xml": hdfs, "yarn-site.xml": yarn}


def _secure_hdfs_properties(layout: Layout) -> dict[str, str]:
    """What the Kerberized HA profile adds: the JournalNode's principal, and the second HDFS.

    The JournalNode runs as the NameNodes' principal (``nn/localhost``; it is part of their HA
    machinery, and the secure fragments already map that principal to the daemon user). Clients
    see the second HDFS as nameservice ``warehouse`` (one NameNode, no HA), the way a client conf
    names another cluster's filesystem; ``dfs.internal.nameservices`` keeps this cluster's
    DataNode to ``tony``, and each NameNode and ZKFC copy names its own nameservice.
    """
    return {
        "dfs.journalnode.kerberos.principal": "nn/localhost@TONY.LOCAL",
        "dfs.journalnode.keytab.file": str(layout.realm.keytab("nn")),
        "dfs.journalnode.kerberos.internal.spnego.principal": "*",
        "dfs.nameservices": f"{NAMESERVICE},{WAREHOUSE}",
        "dfs.internal.nameservices": NAMESERVICE,
        f"dfs.namenode.rpc-address.{WAREHOUSE}": f"127.0.0.1:{layout.port('wh_nn_rpc_port')}",
        f"dfs.namenode.http-address.{WAREHOUSE}": f"localhost:{layout.port('wh_nn_http_port')}",
    }


def _render_warehouse_conf(layout: Layout) -> None:
    """``conf-warehouse/``: the second HDFS's own conf, the rendered single-NameNode one on other ports."""
    conf = _fresh_copy(layout, WAREHOUSE)
    data = layout.home / "data"
    _append(conf / "core-site.xml", {"fs.defaultFS": f"hdfs://127.0.0.1:{layout.port('wh_nn_rpc_port')}"})
    _append(
        conf / "hdfs-site.xml",
        {
            "dfs.namenode.rpc-address": f"127.0.0.1:{layout.port('wh_nn_rpc_port')}",
            "dfs.namenode.http-address": f"127.0.0.1:{layout.port('wh_nn_http_port')}",
            "dfs.namenode.name.dir": str(data / "wh-namenode"),
            "dfs.datanode.data.dir": str(data / "wh-datanode"),
            "dfs.datanode.address": f"127.0.0.1:{layout.port('wh_dn_port')}",
            "dfs.datanode.http.address": f"127.0.0.1:{layout.port('wh_dn_http_port')}",
            "dfs.datanode.ipc.address": f"127.0.0.1:{layout.port('wh_dn_ipc_port')}",
        },
    )


def render_ha_conf(layout: Layout) -> None:
    """The shared HA conf (``conf/``), each id's copy, and ZooKeeper's zoo.cfg."""
    render_conf(layout)
    if layout.secure:
        _render_warehouse_conf(layout)  # from the plain rendered conf, before the HA keys go in
    for name, props in ha_properties(layout).items():
        path = layout.conf / name
        path.write_text(_strip(path.read_text(), _STRIP[name]))
        _append(path, props)
    for nn in NN_IDS:
        conf = _fresh_copy(layout, nn)
        _append(
            conf / "hdfs-site.xml",
            {
                "dfs.ha.namenode.id": nn,
                "dfs.namenode.name.dir": str(layout.home / "data" / nn),
                "dfs.ha.zkfc.port": str(layout.port(NN_PORTS[nn][2])),
                "dfs.nameservice.id": NAMESERVICE,
            },
        )
    for rm in RM_IDS:
        _append(_fresh_copy(layout, rm) / "yarn-site.xml", {"yarn.resourcemanager.ha.id": rm})
    zk_conf = layout.home / "conf-zk"
    zk_conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONF_TEMPLATES / "log4j.properties", zk_conf / "log4j.properties")
    (zk_conf / "zoo.cfg").write_text(
        "# Written by devcluster.py (HA profile): one standalone server on loopback.\n"
        "tickTime=1000\n"
        f"dataDir={layout.home / 'data' / 'zookeeper'}\n"
        f"clientPort={layout.port('zk_port')}\n"
        "clientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr\n"
        "maxSessionTimeout=20000\n"
    )


def _fresh_copy(layout: Layout, ident: str) -> Path:
    conf = layout.home / f"conf-{ident}"
    if conf.exists():
        shutil.rmtree(conf)
    shutil.copytree(layout.conf, conf)
    return conf


# ---------------------------------------------------------------- up


def _tool(layout: Layout, jhome: Path, conf_sub: str, main_class: str, *args: str) -> None:
    """A one-off Hadoop command (format, bootstrapStandby, formatZK) on ``conf-<conf_sub>``."""
    conf = layout.home / f"conf-{conf_sub}"
    cmd = [
        str(jhome / "bin" / "java"),
        "-Xmx256m",
        f"-Dhadoop.log.dir={layout.logs}",
        "-Dhadoop.root.logger=WARN,console",
        "-cp",
        f"{conf}:{layout.webapps}:{layout.jars}/*",
        main_class,
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=daemon_env(layout, jhome), cwd=layout.home)
    if proc.returncode != 0:
        raise ClusterError(
            f"{main_class.rsplit('.', 1)[1]} {' '.join(args)} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
        )


def up_ha(layout: Layout) -> None:
    """Start whatever is down, formatting HDFS and ZooKeeper's failover znode the first time."""
    started = time.monotonic()
    jhome = java_home()
    for sub in (layout.home, layout.logs, layout.run, layout.home / "data"):
        sub.mkdir(parents=True, exist_ok=True)
    downloaded = fetch_jars(layout)
    if layout.secure:
        downloaded |= fetch_native(layout)
        start_kdc(layout)
    render_ha_conf(layout)
    (layout.home / HA_MARKER).write_text("started with TONY_DEVCLUSTER_HA=1\n")
    by = {d.name: d for d in layout.daemons}

    def ensure(*names: str) -> None:
        for name in names:
            if running_pid(layout, by[name]) is None:
                start_daemon(layout, by[name], jhome)

    ensure("zookeeper")
    wait_for("ZooKeeper (ruok)", lambda: zk_ready(layout), layout, (by["zookeeper"],))
    ensure("journalnode")
    wait_for("the JournalNode", lambda: jn_ready(layout), layout, (by["journalnode"],))
    if not (layout.home / "data" / "nn1" / "current" / "VERSION").exists():
        _tool(layout, jhome, "nn1", NN_CLASS, "-format", "-nonInteractive", "-clusterId", "tony-devcluster")
    ensure("namenode-nn1")
    wait_for("NameNode nn1", lambda: nn_state(layout, "nn1") is not None, layout, (by["namenode-nn1"],))
    if not (layout.home / "data" / "nn2" / "current" / "VERSION").exists():
        _tool(layout, jhome, "nn2", NN_CLASS, "-bootstrapStandby", "-nonInteractive")
    if not (layout.home / "data" / ZK_FORMATTED).exists():
        _tool(
            layout, jhome, "nn1", "org.apache.hadoop.hdfs.tools.DFSZKFailoverController", "-formatZK", "-nonInteractive"
        )
        (layout.home / "data" / ZK_FORMATTED).write_text("dfs.ha znode formatted\n")
    ensure("namenode-nn2", "zkfc-nn1", "zkfc-nn2", "datanode")
    hdfs = tuple(by[n] for n in ("namenode-nn1", "namenode-nn2", "zkfc-nn1", "zkfc-nn2", "datanode"))
    wait_for(
        "HDFS HA (one active NameNode with a live DataNode, one standby)", lambda: hdfs_ha_ready(layout), layout, hdfs
    )
    if layout.secure:
        _up_warehouse(layout, jhome, ensure)
    ensure("resourcemanager-rm1", "resourcemanager-rm2", "nodemanager")
    yarn = tuple(by[n] for n in ("resourcemanager-rm1", "resourcemanager-rm2", "nodemanager"))
    wait_for("YARN HA (one active RM with the NodeManager, one standby)", lambda: yarn_ha_ready(layout), layout, yarn)
    print(
        f"devcluster (HA) up in {time.monotonic() - started:.1f}s "
        f"({'jars fetched' if downloaded else 'jars cached'}); state in {layout.home}",
        file=sys.stderr,
    )


def _up_warehouse(layout: Layout, jhome: Path, ensure: Callable[..., None]) -> None:
    """The second HDFS (Kerberized HA profile): formatted once, its NameNode and DataNode."""
    if not (layout.home / "data" / "wh-namenode" / "current" / "VERSION").exists():
        _tool(layout, jhome, WAREHOUSE, NN_CLASS, "-format", "-nonInteractive", "-clusterId", "tony-warehouse")
    ensure("namenode-warehouse", "datanode-warehouse")
    daemons = tuple(d for d in layout.daemons if d.conf_sub == WAREHOUSE)
    wait_for("the second HDFS (warehouse)", lambda: warehouse_ready(layout), layout, daemons)


#: ``down``'s order: YARN, then the ZKFCs (no failover while the NameNodes stop), HDFS, the quorum.
STOP_GROUPS = (
    ("nodemanager",),
    ("resourcemanager-rm1", "resourcemanager-rm2"),
    ("zkfc-nn1", "zkfc-nn2"),
    ("datanode", "datanode-warehouse"),
    ("namenode-nn1", "namenode-nn2", "namenode-warehouse"),
    ("journalnode",),
    ("zookeeper",),
)


def stop_groups(layout: Layout) -> list[list[Daemon]]:
    by = {d.name: d for d in layout.daemons}
    return [[by[n] for n in group if n in by] for group in STOP_GROUPS]
