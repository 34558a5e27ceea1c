"""The HA profile's state: which RM/NameNode is active, failing one over, the addresses ``env`` exports.

Part of ``devcluster.py`` (the profile itself is ``dc_ha.py``); standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request

from dc_layout import ClusterError, Daemon, Layout
from dc_processes import _pid_file, _stop_pids, is_alive, running_pid
from dc_readiness import namenode_serving, spnego_get, wait_for

NAMESERVICE = "tony"
#: The Kerberized HA profile's second HDFS, as the clients' conf names it (a nameservice of one NameNode).
WAREHOUSE = "warehouse"
NN_IDS = ("nn1", "nn2")
RM_IDS = ("rm1", "rm2")
KINDS = {"rm": RM_IDS, "nn": NN_IDS}
NN_PORTS = {
    "nn1": ("nn_rpc_port", "nn_http_port", "zkfc1_port"),
    "nn2": ("nn2_rpc_port", "nn2_http_port", "zkfc2_port"),
}
RM_PORTS = {
    "rm1": {
        "address": "rm_port",
        "scheduler.address": "rm_scheduler_port",
        "resource-tracker.address": "rm_tracker_port",
        "admin.address": "rm_admin_port",
        "webapp.address": "rm_http_port",
    },
    "rm2": {
        "address": "rm2_port",
        "scheduler.address": "rm2_scheduler_port",
        "resource-tracker.address": "rm2_tracker_port",
        "admin.address": "rm2_admin_port",
        "webapp.address": "rm2_http_port",
    },
}


def daemon_of(layout: Layout, kind: str, ident: str) -> Daemon:
    name = f"namenode-{ident}" if kind == "nn" else f"resourcemanager-{ident}"
    return next(d for d in layout.daemons if d.name == name)


def nn_http_url(layout: Layout, nn: str) -> str:
    return f"http://localhost:{layout.port(NN_PORTS[nn][1])}"


def rm_http_url(layout: Layout, rm: str) -> str:
    return f"http://127.0.0.1:{layout.port(RM_PORTS[rm]['webapp.address'])}"


def webhdfs_urls(layout: Layout) -> tuple[str, ...]:
    return tuple(nn_http_url(layout, nn) for nn in NN_IDS)


def rm_urls(layout: Layout) -> tuple[str, ...]:
    return tuple(rm_http_url(layout, rm) for rm in RM_IDS)


# ---------------------------------------------------------------- state


def _get(url: str, layout: Layout, timeout: float = 3.0) -> tuple[int, bytes]:
    """One GET that does not follow redirects (a standby RM redirects to the active one).

    On the Kerberized profile every web server wants SPNEGO, which curl speaks and the standard
    library does not (the launcher's own ticket, as ``dc_readiness`` uses it).
    """
    if layout.secure:
        return spnego_get(url, layout, timeout)

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def nn_state(layout: Layout, nn: str) -> str | None:
    """``active``/``standby`` from the NameNode's JMX, or None when it does not answer."""
    try:
        code, body = _get(f"{nn_http_url(layout, nn)}/jmx?qry=Hadoop:service=NameNode,name=NameNodeStatus", layout)
        beans = json.loads(body).get("beans", []) if code == 200 else []
    except (OSError, ValueError):
        return None
    return str(beans[0].get("State")).lower() if beans else None


def rm_state(layout: Layout, rm: str) -> str | None:
    """``active``/``standby`` from the RM's cluster info (its HA state), or None when it does not answer."""
    try:
        code, body = _get(f"{rm_http_url(layout, rm)}/ws/v1/cluster/info", layout)
    except OSError:
        return None
    if code in (301, 302, 303, 307):
        return "standby"
    try:
        return str(json.loads(body)["clusterInfo"]["haState"]).lower() if code == 200 else None
    except (ValueError, KeyError):
        return None


def state_of(layout: Layout, kind: str, ident: str) -> str | None:
    return nn_state(layout, ident) if kind == "nn" else rm_state(layout, ident)


def active_id(layout: Layout, kind: str) -> str | None:
    """The id of the active RM (``kind`` ``rm``) or NameNode (``nn``), or None."""
    return next((i for i in KINDS[kind] if state_of(layout, kind, i) == "active"), None)


def zk_ready(layout: Layout) -> bool:
    with socket.create_connection(("127.0.0.1", layout.port("zk_port")), timeout=2) as sock:
        sock.sendall(b"ruok")
        return sock.recv(16) == b"imok"


def jn_ready(layout: Layout) -> bool:
    code, _ = _get(
        f"http://127.0.0.1:{layout.port('jn_http_port')}/jmx?qry=Hadoop:service=JournalNode,name=JvmMetrics", layout
    )
    return code == 200


def hdfs_ha_ready(layout: Layout) -> bool:
    """One NameNode active (a live DataNode, safe mode off), the other standby."""
    states = {nn: nn_state(layout, nn) for nn in NN_IDS}
    if sorted(states.values(), key=str) != ["active", "standby"]:
        return False
    active = next(nn for nn, s in states.items() if s == "active")
    return namenode_serving(nn_http_url(layout, active), layout)


def warehouse_ready(layout: Layout) -> bool:
    """The Kerberized HA profile's second HDFS: a live DataNode, safe mode off."""
    return namenode_serving(warehouse_webhdfs_url(layout), layout)


def yarn_ha_ready(layout: Layout) -> bool:
    """One RM active with the NodeManager registered, the other standby."""
    states = {rm: rm_state(layout, rm) for rm in RM_IDS}
    if sorted(states.values(), key=str) != ["active", "standby"]:
        return False
    active = next(rm for rm, s in states.items() if s == "active")
    code, body = _get(f"{rm_http_url(layout, active)}/ws/v1/cluster/metrics", layout)
    return code == 200 and json.loads(body)["clusterMetrics"].get("activeNodes", 0) >= layout.nodemanagers


# ---------------------------------------------------------------- faults


def failover(layout: Layout, kind: str, graceful: bool = False, timeout: float = 120.0) -> str:
    """Kill the active RM or NameNode (SIGKILL, or SIGTERM when ``graceful``); return the new active id.

    Returns once the other one answers as active. The killed one stays down until ``up``.
    """
    old = active_id(layout, kind)
    if old is None:
        raise ClusterError(f"no active {'ResourceManager' if kind == 'rm' else 'NameNode'} to fail over from")
    (new,) = [i for i in KINDS[kind] if i != old]
    daemon, survivor = daemon_of(layout, kind, old), daemon_of(layout, kind, new)
    pid = running_pid(layout, daemon)
    began = time.monotonic()
    if pid is not None:
        if graceful:
            _stop_pids([pid])
        else:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while is_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
    _pid_file(layout, daemon).unlink(missing_ok=True)
    wait_for(
        f"{new} to become the active {kind}",
        lambda: state_of(layout, kind, new) == "active",
        layout,
        (survivor,),
        timeout=timeout,
    )
    print(f"{kind} failed over from {old} to {new} in {time.monotonic() - began:.1f}s", file=sys.stderr)
    return new


# ---------------------------------------------------------------- status and env


def status_urls(layout: Layout) -> dict[str, str]:
    urls = {
        "zookeeper": f"127.0.0.1:{layout.port('zk_port')}",
        "journalnode": f"http://127.0.0.1:{layout.port('jn_http_port')}/",
        "datanode": f"http://localhost:{layout.port('dn_http_port')}/",
        "nodemanager": f"{layout.nm_url}/node",
    }
    for nn in NN_IDS:
        urls[f"namenode-{nn}"] = f"{nn_http_url(layout, nn)}/  ({nn_state(layout, nn) or 'no answer'})"
        urls[f"zkfc-{nn}"] = f"127.0.0.1:{layout.port(NN_PORTS[nn][2])}"
    for rm in RM_IDS:
        urls[f"resourcemanager-{rm}"] = f"{rm_http_url(layout, rm)}/cluster  ({rm_state(layout, rm) or 'no answer'})"
    if layout.secure:
        urls["namenode-warehouse"] = f"{warehouse_webhdfs_url(layout)}/  (fs hdfs://{WAREHOUSE})"
        urls["datanode-warehouse"] = f"http://localhost:{layout.port('wh_dn_http_port')}/"
    return urls


def warehouse_webhdfs_url(layout: Layout) -> str:
    return f"http://localhost:{layout.port('wh_nn_http_port')}"


def ha_exports(layout: Layout, yarn_conn: dict, webhdfs_conn: dict) -> dict[str, str]:
    """What ``env`` exports for the HA profile: every RM and NameNode, comma-separated (the
    provider fails over between them), in the variables and in the Airflow connections."""
    rms, nns = rm_urls(layout), webhdfs_urls(layout)
    rm_ports = [url.rsplit(":", 1)[1] for url in rms]
    yarn_conn["host"] = ",".join(f"127.0.0.1:{port}" for port in rm_ports)
    yarn_conn["port"] = int(rm_ports[0])
    yarn_conn["extra"]["webhdfs_url"] = ",".join(nns)
    webhdfs_conn["host"] = ",".join(f"localhost:{url.rsplit(':', 1)[1]}" for url in nns)
    return {
        "TONY_RM_URL": ",".join(rms),
        "TONY_WEBHDFS_URL": ",".join(nns),
        "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(yarn_conn, separators=(",", ":")),
        "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps(webhdfs_conn, separators=(",", ":")),
        # `failover` and `active` (tests, bench) need the same layout.
        "TONY_DEVCLUSTER_HA": "1",
        **(
            {"TONY_WAREHOUSE_FS": f"hdfs://{WAREHOUSE}", "TONY_WAREHOUSE_WEBHDFS_URL": warehouse_webhdfs_url(layout)}
            if layout.secure
            else {}
        ),
        "TONY_DEVCLUSTER_PORT_BASE": str(layout.port_base),
    }


def command(layout: Layout, name: str, kind: str, graceful: bool) -> int:
    """``failover rm|nn`` prints the new active id; ``active rm|nn`` the active one (exit 3: none)."""
    if name == "failover":
        try:
            print(failover(layout, kind, graceful=graceful))
        except ClusterError as exc:
            print(f"devcluster failover failed: {exc}", file=sys.stderr)
            return 1
        return 0
    found = active_id(layout, kind)
    if found is None:
        print(f"no active {kind}", file=sys.stderr)
        return 3
    print(found)
    return 0
