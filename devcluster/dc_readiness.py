"""When a local cluster is ready: HDFS, YARN and each NodeManager, over their REST APIs (SPNEGO when secure).

Part of ``devcluster.py``; standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from typing import Callable

from dc_layout import GPU_LABEL, ClusterError, Daemon, Layout
from dc_processes import _tail, running_pid


def _get_json(url: str, layout: Layout | None = None) -> dict:
    if layout is not None and layout.secure:
        return _get_json_spnego(url, layout)
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.load(resp)


def _launcher_ccache(layout: Layout) -> dict[str, str]:
    """The launcher's own ticket (the submitting user's keytab), in its own cache."""
    realm = layout.realm
    env = {**os.environ, "KRB5_CONFIG": str(realm.krb5_conf), "KRB5CCNAME": f"FILE:{realm.dir / 'ccache-launcher'}"}
    if subprocess.run(["klist", "-s"], env=env).returncode != 0:
        proc = subprocess.run(
            ["kinit", "-kt", str(realm.keytab(realm.user)), realm.user_principal],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise OSError(f"kinit failed: {proc.stderr.strip()}")
    return env


def spnego_get(url: str, layout: Layout, timeout: float = 3.0) -> tuple[int, bytes]:
    """One GET with SPNEGO (the launcher's own ticket): its status and body, redirects not followed.

    Secure web servers want SPNEGO: curl speaks it; the standard library does not.
    """
    proc = subprocess.run(
        ["curl", "-sS", "--max-time", str(timeout), "--negotiate", "-u", ":", "-w", "\n%{http_code}", url],
        env=_launcher_ccache(layout),
        capture_output=True,
    )
    if proc.returncode != 0:
        raise OSError(f"curl {url}: {proc.stderr.decode(errors='replace').strip()}")
    body, _, code = proc.stdout.rpartition(b"\n")
    return int(code), body


def _get_json_spnego(url: str, layout: Layout) -> dict:
    code, body = spnego_get(url, layout)
    if code >= 400:
        raise OSError(f"curl {url}: HTTP {code}")
    return json.loads(body)


def namenode_serving(http_url: str, layout: Layout) -> bool:
    """The NameNode at ``http_url`` has a live DataNode and is out of safe mode (its JMX)."""
    base = f"{http_url}/jmx?qry=Hadoop:service=NameNode,name="
    beans = _get_json(base + "FSNamesystemState", layout).get("beans", [])
    if not beans or beans[0].get("NumLiveDataNodes", 0) < 1:
        return False
    return not _get_json(base + "NameNodeInfo", layout)["beans"][0].get("Safemode")


def hdfs_ready(layout: Layout) -> bool:
    return namenode_serving(f"http://127.0.0.1:{layout.port('nn_http_port')}", layout)


def yarn_ready(layout: Layout) -> bool:
    metrics = _get_json(f"{layout.rm_url}/ws/v1/cluster/metrics", layout)["clusterMetrics"]
    return metrics.get("activeNodes", 0) >= layout.nodemanagers


def rm_nodes(layout: Layout) -> dict[str, dict]:
    """The ResourceManager's view of its nodes, by node id."""
    nodes = (
        _get_json(
            f"{layout.rm_url}/ws/v1/cluster/nodes?states=NEW,RUNNING,UNHEALTHY,LOST,"
            "SHUTDOWN,DECOMMISSIONING,DECOMMISSIONED,REBOOTED",
            layout,
        ).get("nodes")
        or {}
    ).get("node") or []
    return {node["id"]: node for node in nodes}


def nm_ready(layout: Layout, index: int, since_ms: int) -> bool:
    """NodeManager ``index`` is RUNNING in the RM and has reported since ``since_ms``."""
    node = rm_nodes(layout).get(layout.nm_id(index))
    return bool(node) and node["state"] == "RUNNING" and node.get("lastHealthUpdate", 0) >= since_ms


def _rm_post(layout: Layout, path: str, body: dict) -> None:
    # The RM's web filter makes an unauthenticated caller the static web user;
    # with ACLs off (yarn-site) that user may change node labels.
    req = urllib.request.Request(
        f"{layout.rm_url}/ws/v1/cluster/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise ClusterError(
            f"the ResourceManager refused POST {path}: HTTP {exc.code} {exc.read()[:500].decode(errors='replace')}"
        ) from exc


def ensure_gpu_label(layout: Layout) -> None:
    """Create the ``gpu`` node label and put it on the GPU NodeManager, and on no other node.

    Idempotent: the labels are kept in the RM's file store under the state
    directory, so a restarted RM already has them.
    """
    if layout.gpu_node is None:
        return
    labels = _get_json(f"{layout.rm_url}/ws/v1/cluster/get-node-labels", layout)
    names = [label["name"] for label in _as_list((labels.get("nodeLabelInfo") if labels else None) or [])]
    if GPU_LABEL not in names:
        _rm_post(layout, "add-node-labels", {"nodeLabelInfo": [{"name": GPU_LABEL, "exclusivity": False}]})
    node_id = layout.nm_id(layout.gpu_node)
    nodes = rm_nodes(layout)
    if GPU_LABEL not in (nodes.get(node_id, {}).get("nodeLabels") or []):
        # This endpoint takes the labels as a query parameter, not a body.
        _rm_post(layout, f"nodes/{node_id}/replace-labels?labels={GPU_LABEL}", {})
    # Only that node: a home first started with fewer NodeManagers had its GPU node at
    # another index, and the RM's label store still puts `gpu` there (no labels = none).
    for other, node in nodes.items():
        if other != node_id and GPU_LABEL in (node.get("nodeLabels") or []):
            _rm_post(layout, f"nodes/{other}/replace-labels", {})


def _as_list(value: object) -> list:
    # Jersey's JSON renders a one-element list as the element itself.
    return value if isinstance(value, list) else [value]


def wait_for(
    what: str, check: Callable[[], bool], layout: Layout, daemons: tuple[Daemon, ...], timeout: float = 180.0
) -> None:
    """Poll `check` until it holds; fail naming the daemon that died or stalled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for daemon in daemons:
            if running_pid(layout, daemon) is None:
                raise ClusterError(
                    f"{daemon.name} exited while waiting for {what}; "
                    f"tail of {layout.logs / (daemon.name + '.log')}:\n"
                    f"{_tail(layout.logs / (daemon.name + '.log'))}"
                )
        try:
            if check():
                return
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.5)
    culprit = daemons[-1]
    raise ClusterError(
        f"timed out after {timeout:.0f}s waiting for {what}; tail of "
        f"{layout.logs / (culprit.name + '.log')}:\n{_tail(layout.logs / (culprit.name + '.log'))}"
    )
