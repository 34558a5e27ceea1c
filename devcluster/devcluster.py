#!/usr/bin/env python3
"""A real local Hadoop (HDFS + YARN, one or several NodeManagers) built from Maven Central jars.

Why this exists: the provider runs TensorFlow on YARN, and nothing about it
can be shown true without a real ResourceManager, NodeManager, NameNode and
DataNode. No Docker engine and no Hadoop tarball are available where this
project is developed, but Maven Central serves every Hadoop jar, so this
launcher resolves them with Maven, renders a configuration directory and
starts the four daemons as plain JVMs on loopback.

Standard library only: it runs before the project's virtualenv exists.

    python3 devcluster/devcluster.py up|down|status|env|jars
    python3 devcluster/devcluster.py stop-nm I [--lose] | start-nm I
    TONY_DEVCLUSTER_HA=1 python3 devcluster/devcluster.py up | failover rm|nn [--graceful] | active rm|nn

``$TONY_DEVCLUSTER_NODEMANAGERS`` (default 1) starts that many NodeManagers
(at most 4), NodeManager ``I`` on its own loopback address (``localhost``
for 0, ``127.0.0.<I+1>`` after it) so that YARN sees distinct hosts and
placement by host can be shown. With two or more, the last one carries the
node label ``gpu`` (queue ``training`` may use it) and advertises
``$TONY_DEVCLUSTER_GPUS`` (default 4) ``yarn.io/gpu`` through Hadoop's own GPU
plugin, which discovers them by running a stand-in ``nvidia-smi``.

Everything (jars, conf, data, logs, PIDs) lives under one directory,
``$TONY_DEVCLUSTER_HOME`` (default ``.devcluster/`` in the checkout), and all
ports derive from ``$TONY_DEVCLUSTER_PORT_BASE`` (default 19000), so two
checkouts can run side by side.

``TONY_DEVCLUSTER_SECURE=1`` (``make cluster-up SECURE=1``) starts the secure
profile instead: a local MIT KDC (``kdc.py``), Kerberos on every RPC, SPNEGO
on every web server, block access tokens, SASL data transfer and YARN ACLs
(the fragments in ``conf-secure/``), in its own default home
(``.devcluster-secure/``). ``env``, ``status`` and ``down`` read the marker
``up`` leaves in a secure home; a plain ``up`` of such a home is refused
(see ``choose_profile``).

``TONY_DEVCLUSTER_HA=1`` (``make cluster-up HA=1``) starts the HA profile (``dc_ha.py``):
ZooKeeper, two ResourceManagers and two NameNodes of nameservice ``tony`` with automatic
failover, in ``.devcluster-ha/`` (port base 20200 unless ``TONY_DEVCLUSTER_PORT_BASE`` says).

This file is the command line (``up``, ``down``, ``status``, ``env``, the
NodeManager faults); the rest is split by concern: ``dc_layout`` (homes,
ports, daemons, the profile), ``dc_configs`` (the jars and the rendered
configuration), ``dc_processes`` (the JDK, PIDs, starting and stopping),
``dc_readiness`` (when HDFS, YARN and a NodeManager are ready) and
``dc_kerberos`` (the secure profile's KDC; the realm is ``kdc``'s).
"""

from __future__ import annotations

import argparse
import getpass
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dc_ha
import dc_ha_state
import kdc
from dc_configs import (
    fake_nvidia_smi,
    fetch_jars,
    fetch_native,
    render_conf,
)
from dc_kerberos import _kdc_pid, start_kdc
from dc_layout import (
    DAEMONS,
    HA_MARKER,
    MAX_NODEMANAGERS,
    NM_PORT_KEYS,
    NM_PORT_STRIDE,
    PORT_OFFSETS,
    SECURE_MARKER,
    ClusterError,
    Daemon,
    Layout,
    choose_profile,
    nodemanager,
)
from dc_processes import (
    _descendants_in,
    _pid_file,
    _stop_pid,
    _stop_pids,
    daemon_env,
    format_namenode,
    is_alive,
    java_home,
    running_pid,
    start_daemon,
    stop_nm,
)
from dc_readiness import ensure_gpu_label, hdfs_ready, nm_ready, wait_for, yarn_ready

# What other scripts and the tests reach through this module (it was one file before the split).
__all__ = [
    "DAEMONS",
    "MAX_NODEMANAGERS",
    "NM_PORT_KEYS",
    "NM_PORT_STRIDE",
    "PORT_OFFSETS",
    "HA_MARKER",
    "SECURE_MARKER",
    "ClusterError",
    "Daemon",
    "Layout",
    "choose_profile",
    "down",
    "env_lines",
    "fake_nvidia_smi",
    "is_alive",
    "main",
    "nodemanager",
    "print_status",
    "render_conf",
    "start_nm",
    "stop_nm",
    "up",
]


def up(layout: Layout) -> None:
    if layout.ha:
        dc_ha.up_ha(layout)
        print_status(layout, stream=sys.stderr)
        return
    started = time.monotonic()
    jhome = java_home()
    for sub in (layout.home, layout.logs, layout.run, layout.home / "data"):
        sub.mkdir(parents=True, exist_ok=True)
    downloaded = fetch_jars(layout)
    if layout.secure:
        downloaded |= fetch_native(layout)
        start_kdc(layout)
    render_conf(layout)
    env = daemon_env(layout, jhome)
    format_namenode(layout, jhome, env)
    by_name = {d.name: d for d in layout.daemons}
    for daemon in layout.daemons:
        if running_pid(layout, daemon) is None:
            start_daemon(layout, daemon, jhome)
    wait_for(
        "HDFS (a live DataNode, safe mode off)",
        lambda: hdfs_ready(layout),
        layout,
        (by_name["namenode"], by_name["datanode"]),
    )
    wait_for(
        f"YARN ({layout.nodemanagers} active NodeManager(s))",
        lambda: yarn_ready(layout),
        layout,
        (by_name["resourcemanager"], *[d for d in layout.daemons if d.node is not None]),
    )
    if layout.multi_node:
        ensure_gpu_label(layout)
    print(
        f"devcluster up in {time.monotonic() - started:.1f}s "
        f"({'jars fetched' if downloaded else 'jars cached'}); state in {layout.home}",
        file=sys.stderr,
    )
    print_status(layout, stream=sys.stderr)


def down(layout: Layout) -> None:
    # YARN first (its NodeManager kills the containers it runs), then HDFS.
    # Every NodeManager this home ever ran, whatever the setting now says.
    started = {p.stem for p in layout.run.glob("nodemanager-*.pid")}
    extra = tuple(
        nodemanager(int(name.rpartition("-")[2])) for name in sorted(started) if name.rpartition("-")[2].isdigit()
    )
    # The NodeManagers together, then the RM, the DataNode and the NameNode.
    nodemanagers = [d for d in DAEMONS + extra if d.node is not None]
    groups = (
        dc_ha.stop_groups(layout) if layout.ha else [nodemanagers, *([d] for d in reversed(DAEMONS) if d.node is None)]
    )
    for group in groups:
        running = {daemon: pid for daemon in group if (pid := running_pid(layout, daemon)) is not None}
        _stop_pids(list(running.values()))
        for daemon in group:
            if daemon in running:
                print(f"stopped {daemon.name} (pid {running[daemon]})", file=sys.stderr)
            _pid_file(layout, daemon).unlink(missing_ok=True)
    leftovers = _descendants_in(layout)
    _stop_pids(leftovers, grace=3.0)
    if leftovers:
        print(f"stopped {len(leftovers)} leftover container process(es)", file=sys.stderr)
    kdc_pid = _kdc_pid(layout)
    if kdc_pid is not None:
        _stop_pid(kdc_pid)
        print(f"stopped the KDC (pid {kdc_pid})", file=sys.stderr)
    (layout.run / "kdc.pid").unlink(missing_ok=True)


def print_status(layout: Layout, stream=sys.stdout) -> bool:
    urls = {
        "namenode": f"{layout.webhdfs_url}/  (fs.defaultFS {layout.fs_default})",
        "datanode": f"http://localhost:{layout.port('dn_http_port')}/",
        "resourcemanager": f"{layout.rm_url}/cluster",
    }
    for index in range(layout.nodemanagers):
        label = "  (label gpu)" if index == layout.gpu_node else ""
        urls[nodemanager(index).name] = f"{layout.nm_url_of(index)}/node{label}"
    if layout.ha:
        urls = dc_ha_state.status_urls(layout)
    all_up = True
    for daemon in layout.daemons:
        pid = running_pid(layout, daemon)
        all_up &= pid is not None
        state = f"up (pid {pid})" if pid else "down"
        print(f"{daemon.name:20} {state:18} {urls[daemon.name]}", file=stream)
    if layout.secure:
        pid = _kdc_pid(layout)
        all_up &= pid is not None
        state = f"up (pid {pid})" if pid else "down"
        print(f"{'kdc':16} {state:18} realm {kdc.REALM} on 127.0.0.1:{layout.port('kdc_port')}", file=stream)
    return all_up


def env_lines(layout: Layout) -> list[str]:
    """Shell exports that point skein, the hdfs package and Airflow at this cluster.

    No JDK is needed to print them: a machine without one (an Airflow image, ``make test-fast``,
    the unit tests that run pytest on an integration module) gets every export but ``JAVA_HOME``.
    Only the daemons (``up``) and skein's driver need Java, and they name it when it is missing.
    """
    try:
        jhome: Path | None = java_home()
    except ClusterError:
        jhome = None
    user = getpass.getuser()
    yarn_conn = {
        "conn_type": "tony_yarn",
        "host": "127.0.0.1",
        "port": layout.port("rm_http_port"),
        "extra": {
            "hadoop_conf_dir": str(layout.conf),
            "queue": "default",
            "webhdfs_url": layout.webhdfs_url,
            "webhdfs_user": user,
            "skein_config": str(layout.skein),
            "base_path": "/user/" + user + "/tony",
        },
    }
    webhdfs_conn = {"conn_type": "webhdfs", "host": "localhost", "port": layout.port("nn_http_port"), "login": user}
    exports = {
        "TONY_DEVCLUSTER_HOME": str(layout.home),
        **({"JAVA_HOME": str(jhome)} if jhome is not None else {}),
        "HADOOP_CONF_DIR": str(layout.conf),
        "HADOOP_USER_NAME": user,
        "SKEIN_CONFIG": str(layout.skein),
        "TONY_WEBHDFS_URL": layout.webhdfs_url,
        "TONY_WEBHDFS_USER": user,
        "TONY_RM_URL": layout.rm_url,
        "TONY_NM_URL": layout.nm_url,
        "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(yarn_conn, separators=(",", ":")),
        "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps(webhdfs_conn, separators=(",", ":")),
    }
    if layout.ha:
        exports.update(dc_ha_state.ha_exports(layout, yarn_conn, webhdfs_conn))
    if layout.multi_node:
        # Tests and fault scripts that call `stop-nm`/`start-nm` need the same layout.
        exports["TONY_DEVCLUSTER_PORT_BASE"] = str(layout.port_base)
        exports["TONY_DEVCLUSTER_NODEMANAGERS"] = str(layout.nodemanagers)
        exports["TONY_DEVCLUSTER_GPUS"] = str(layout.gpus)
    if layout.secure:
        realm = layout.realm
        yarn_conn["extra"].update(principal=realm.user_principal, keytab=str(realm.keytab(realm.user)))
        webhdfs_conn["extra"] = {"use_ssl": False}
        exports.update(
            {
                "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(yarn_conn, separators=(",", ":")),
                "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps(webhdfs_conn, separators=(",", ":")),
                "KRB5_CONFIG": str(realm.krb5_conf),
                # Our own ticket cache, so the realm never mixes with a user's other tickets.
                "KRB5CCNAME": f"FILE:{realm.ccache}",
                # The JVMs skein starts read krb5.conf from this property only.
                "JDK_JAVA_OPTIONS": f"-Djava.security.krb5.conf={realm.krb5_conf}",
                "TONY_KERBEROS_PRINCIPAL": realm.user_principal,
                "TONY_KERBEROS_KEYTAB": str(realm.keytab(realm.user)),
                "TONY_KERBEROS_OTHER_PRINCIPAL": realm.other_principal,
                "TONY_KERBEROS_OTHER_KEYTAB": str(realm.keytab("other")),
            }
        )
        del exports["HADOOP_USER_NAME"]
    lines = [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
    lines.append(f'export PATH={shlex.quote(str(layout.bin))}:"$PATH"')
    return lines


def start_nm(layout: Layout, index: int) -> None:
    """Start one NodeManager again and wait until the RM schedules on it."""
    daemon = nodemanager(index)
    if running_pid(layout, daemon) is not None:
        return
    since_ms = int(time.time() * 1000)
    start_daemon(layout, daemon, java_home())
    wait_for(
        f"{daemon.name} ({layout.nm_id(index)}) RUNNING in the ResourceManager",
        lambda: nm_ready(layout, index, since_ms),
        layout,
        (daemon,),
    )


def _node_index(layout: Layout, raw: str | None, parser: argparse.ArgumentParser) -> int:
    if raw is None or not raw.isdigit() or not 0 <= int(raw) < layout.nodemanagers:
        parser.error(
            f"give a NodeManager index from 0 to {layout.nodemanagers - 1} "
            f"(TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers}); got {raw!r}"
        )
    return int(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        choices=["up", "down", "status", "env", "jars", "stop", "stop-nm", "start-nm", "failover", "active"],
    )
    parser.add_argument(
        "daemon",
        nargs="?",
        help="with `stop`: stop only this daemon (`up` starts it again); with "
        "`stop-nm`/`start-nm`: the NodeManager's index; with `failover`/`active` (HA profile): rm or nn",
    )
    parser.add_argument("--graceful", action="store_true", help="with `failover`: SIGTERM, not SIGKILL, the active one")
    parser.add_argument(
        "--lose",
        action="store_true",
        help="with `stop-nm`: SIGKILL the NodeManager and its containers (a lost machine)",
    )
    args = parser.parse_args(argv)
    try:
        layout = Layout.from_env(args.command)
    except ClusterError as exc:
        print(f"devcluster {args.command} failed: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command in ("failover", "active"):
            if not layout.ha or args.daemon not in dc_ha_state.KINDS:
                parser.error(f"{args.command} needs the HA profile (TONY_DEVCLUSTER_HA=1) and rm or nn")
            return dc_ha_state.command(layout, args.command, args.daemon, args.graceful)
        if args.command == "stop-nm":
            stop_nm(layout, _node_index(layout, args.daemon, parser), args.lose)
        elif args.command == "start-nm":
            start_nm(layout, _node_index(layout, args.daemon, parser))
        elif args.command == "up":
            up(layout)
        elif args.command == "down":
            down(layout)
        elif args.command == "jars":  # scripts/bootstrap.py --jars: the Maven step alone, no daemon
            print(f"Hadoop jars {'fetched' if fetch_jars(layout) else 'cached'} in {layout.jars}", file=sys.stderr)
            if layout.secure:
                fetch_native(layout)
        elif args.command == "stop":
            names = [d.name for d in layout.daemons]
            if args.daemon not in names:
                parser.error(f"stop needs a daemon name, one of {names}; got {args.daemon!r}")
            daemon = next(d for d in layout.daemons if d.name == args.daemon)
            pid = running_pid(layout, daemon)
            if pid is not None:
                _stop_pid(pid)
            _pid_file(layout, daemon).unlink(missing_ok=True)
        elif args.command == "status":
            return 0 if print_status(layout) else 3
        else:
            print("\n".join(env_lines(layout)))
    except ClusterError as exc:
        print(f"devcluster {args.command} failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
