"""Is the AM's node gone? The evidence a follower reads when the proxy cannot reach the AM.

A hung AM and a lost AM node look the same from the AM's state document: it
stops changing. They differ in what a retry should be told, and in how soon
the follower can know: on a production ResourceManager a node that died stays
RUNNING until its liveness expires (``yarn.nm.liveness-monitor.expiry-interval-ms``,
ten minutes by default), so waiting for YARN is no answer. Two facts together
are: the RM's proxy cannot reach the AM (a 5xx answer for its page, not
merely a stale document), *and* the AM container's node itself is gone: the
RM already reports it LOST/UNHEALTHY/SHUTDOWN/DECOMMISSIONED, or its
NodeManager's own REST port refuses connections or cannot be connected to.
A NodeManager that is only slow (it accepts the connection, then answers late
or not at all within the timeout) is not lost: under load that is the usual
case, and killing a healthy job for it would be the false kill this rule must
not make.

Pure parsing (``am_node_of_attempts``, ``judge``) plus one blocking and one
asyncio reader that share it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx

from airflow_provider_tony.runtime.errors import ClusterError

__all__ = [
    "LOST_NODE_STATES",
    "AmNode",
    "am_node_of_attempts",
    "judge",
    "read_am_node",
    "read_am_node_async",
]

#: The RM's ``NodeState``s of a node whose containers are gone (or going).
LOST_NODE_STATES = frozenset({"LOST", "UNHEALTHY", "SHUTDOWN", "DECOMMISSIONED"})


@dataclass(frozen=True)
class AmNode:
    """What is known of the node running an application's current AM attempt.

    :param node_id: the NodeManager's id (``host:port``), as the RM names it.
    :param rm_state: the RM's ``NodeState`` of that node (RUNNING while its liveness has not expired).
    :param nm_answer: what the NodeManager's own REST port did: ``ok``, ``refused`` (no connection
        could be made: the process or the host is gone) or ``slow`` (connected, no answer in time).
    :param http_address: the NodeManager's web address (``nodeHTTPAddress``).
    """

    node_id: str
    rm_state: str
    nm_answer: str
    http_address: str = ""

    @property
    def lost(self) -> bool:
        return self.rm_state in LOST_NODE_STATES or self.nm_answer == "refused"

    def describe(self) -> str:
        if self.rm_state in LOST_NODE_STATES:
            return f"node {self.node_id} is {self.rm_state} in the ResourceManager"
        if self.nm_answer == "refused":
            return (
                f"node {self.node_id}'s NodeManager ({self.http_address}) refuses connections "
                f"(the ResourceManager still reports it {self.rm_state} until its liveness expires)"
            )
        return f"node {self.node_id} is {self.rm_state}, its NodeManager {self.nm_answer}"


def am_node_of_attempts(data: Any, app_id: str) -> tuple[str, str]:
    """The current attempt's ``(nodeId, nodeHttpAddress)`` from ``/apps/<id>/appattempts``."""
    attempts = ((data or {}).get("appAttempts") or {}).get("appAttempt") if isinstance(data, dict) else None
    if not isinstance(attempts, list) or not attempts:
        raise ClusterError(f"the ResourceManager lists no attempt of {app_id}")
    last = max(attempts, key=lambda a: int(a.get("id") or 0) if isinstance(a, dict) else 0)
    node_id = str(last.get("nodeId") or "")
    if not node_id:
        raise ClusterError(f"the ResourceManager names no node for {app_id}'s current attempt")
    return node_id, str(last.get("nodeHttpAddress") or "")


def judge(node_id: str, node: Any, http_address: str, nm_answer: str) -> AmNode:
    """An ``AmNode`` from the RM's ``/nodes/<id>`` answer and the NodeManager probe's outcome."""
    info = node.get("node") if isinstance(node, dict) else None
    info = info if isinstance(info, dict) else {}
    return AmNode(
        node_id=node_id,
        rm_state=str(info.get("state") or "UNKNOWN"),
        nm_answer=nm_answer,
        http_address=str(info.get("nodeHTTPAddress") or http_address),
    )


def _probe_outcome(exc: BaseException | None) -> str:
    """A NodeManager probe's outcome: only a connection that could not be made counts as gone."""
    if exc is None:
        return "ok"
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return "refused"
    return "slow"  # connected but late (ReadTimeout), or any answer at all: the process is there


def _urls(rm_url: str, app_id: str) -> tuple[str, str]:
    base = f"{rm_url.rstrip('/')}/ws/v1/cluster"
    return f"{base}/apps/{urllib.parse.quote(app_id, safe='')}/appattempts", f"{base}/nodes/"


def _nm_info(http_address: str) -> str:
    return f"http://{http_address}/ws/v1/node/info"


def _json(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise ClusterError(f"{what}: HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError as exc:
        raise ClusterError(f"{what}: not JSON ({exc})") from None


def read_am_node(http: httpx.Client, rm_url: str, app_id: str) -> AmNode:
    """The AM's node as the RM and its NodeManager tell it (blocking: the CLI and the operator)."""
    attempts_url, nodes_url = _urls(rm_url, app_id)
    try:
        node_id, address = am_node_of_attempts(_json(http.get(attempts_url), "appattempts"), app_id)
        node = _json(http.get(nodes_url + urllib.parse.quote(node_id, safe="")), f"node {node_id}")
    except httpx.HTTPError as exc:
        raise ClusterError(f"the ResourceManager could not say where {app_id}'s AM runs: {exc}") from exc
    address = judge(node_id, node, address, "ok").http_address
    probe: BaseException | None = None
    try:
        http.get(_nm_info(address))
    except httpx.HTTPError as exc:
        probe = exc
    return judge(node_id, node, address, _probe_outcome(probe))


async def read_am_node_async(http: httpx.AsyncClient, rm_url: str, app_id: str) -> AmNode:
    """``read_am_node`` on the triggerer's event loop."""
    attempts_url, nodes_url = _urls(rm_url, app_id)
    try:
        node_id, address = am_node_of_attempts(_json(await http.get(attempts_url), "appattempts"), app_id)
        node = _json(await http.get(nodes_url + urllib.parse.quote(node_id, safe="")), f"node {node_id}")
    except httpx.HTTPError as exc:
        raise ClusterError(f"the ResourceManager could not say where {app_id}'s AM runs: {exc}") from exc
    address = judge(node_id, node, address, "ok").http_address
    probe: BaseException | None = None
    try:
        await http.get(_nm_info(address))
    except httpx.HTTPError as exc:
        probe = exc
    return judge(node_id, node, address, _probe_outcome(probe))
