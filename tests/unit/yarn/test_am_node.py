"""A lost AM node told apart from a hung AM (``yarn/am_node.py`` and the follower's rule).

The follower names the AM's node lost only on two facts together: the RM's
proxy cannot reach the AM (a 5xx, not a stale document) for
``am_unreachable_timeout``, and the node itself is gone (the RM says so, or its
NodeManager refuses connections). These tests drive the follower with plain
clocks and scripted answers, and the HTTP readers and the trigger with an
``httpx.MockTransport`` answering as the RM, its proxy and a NodeManager do.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.triggers import tony
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.am_node import AmNode, am_node_of_attempts, read_am_node
from airflow_provider_tony.yarn.follower import (
    KIND_AM_NODE_LOST,
    KIND_HUNG_AM,
    Action,
    AmUnreachable,
    AppReport,
    Follower,
    TonyEvent,
    follow_step,
)

APP = "application_1700000000000_0009"
RM = "http://rm:8088"
NODE = "nm2.example:45454"
NM_HTTP = "nm2.example:8042"
T0 = 1000.0
STALE, REACH = 60.0, 15.0


def running() -> AppReport:
    return AppReport(app_id=APP, state="RUNNING", tracking_url=f"{RM}/cluster/app/{APP}")


def live(seq: int) -> StateDocument:
    return StateDocument(application_id=APP, app_state="RUNNING", seq=seq)


UNREACHABLE = AmUnreachable("HTTP 502 from the proxy")
LOST = AmNode(NODE, "RUNNING", "refused", NM_HTTP)
GONE_IN_RM = AmNode(NODE, "LOST", "refused", NM_HTTP)
HEALTHY = AmNode(NODE, "RUNNING", "ok", NM_HTTP)
SLOW = AmNode(NODE, "RUNNING", "slow", NM_HTTP)


class Script:
    """A blocking transport: YARN says RUNNING, the AM's answers and the node's come from lists."""

    def __init__(self, fetches: list[StateDocument | None | AmUnreachable], nodes: list[AmNode | ClusterError]) -> None:
        self.fetches, self.nodes, self.asked = fetches, nodes, []  # type: list[str]

    def report(self, app_id: str) -> AppReport:
        self.asked.append("report")
        return running()

    def am_fetch(self, app_id: str) -> StateDocument | None:
        self.asked.append("am_fetch")
        answer = self.fetches.pop(0) if len(self.fetches) > 1 else self.fetches[0]
        if isinstance(answer, AmUnreachable):
            raise answer
        return answer

    def am_node(self, app_id: str) -> AmNode:
        self.asked.append("am_node")
        answer = self.nodes.pop(0) if len(self.nodes) > 1 else self.nodes[0]
        if isinstance(answer, ClusterError):
            raise answer
        return answer

    def ack_final(self, app_id: str) -> None:
        self.asked.append("ack_final")

    def kill(self, app_id: str) -> None:
        self.asked.append("kill")


def follow(script: Script, times: list[float]) -> list[Any]:
    f = Follower(APP, startup_timeout=600.0, am_stale_timeout=STALE, am_unreachable_timeout=REACH)
    return [follow_step(f, t, script) for t in times]


def test_a_lost_am_node_ends_the_follow_retryable_naming_the_node_once_the_proxy_failed_long_enough() -> None:
    script = Script([live(1), UNREACHABLE], [LOST])
    steps = follow(script, [T0, T0 + 5, T0 + 5 + REACH - 0.1, T0 + 5 + REACH])
    assert [s.action for s in steps] == [Action.NONE, Action.NONE, Action.NONE, Action.KILL_AM_NODE_LOST]
    assert script.asked.count("am_node") == 1, "the node is looked at only once the proxy failed for the timeout"
    result = steps[-1].result
    assert result is not None and result.failure is not None
    assert result.failure.kind == KIND_AM_NODE_LOST and result.failure.retryable and result.retryable
    assert NODE in result.failure.message and "HTTP 502" in result.failure.message
    assert "refuses connections" in result.failure.message
    assert script.asked[-1] == "kill"


def test_a_node_the_rm_reports_lost_is_named_so() -> None:
    steps = follow(Script([UNREACHABLE], [GONE_IN_RM]), [T0, T0 + REACH])
    result = steps[-1].result
    assert result is not None and result.failure is not None and result.failure.kind == KIND_AM_NODE_LOST
    assert f"node {NODE} is LOST in the ResourceManager" in result.failure.message


@pytest.mark.parametrize("node", [HEALTHY, SLOW, ClusterError("the RM could not say")], ids=["ok", "slow", "error"])
def test_an_unreachable_am_on_a_live_or_unknown_node_is_not_named_lost_and_the_hung_am_rule_still_holds(
    node: AmNode | ClusterError,
) -> None:
    """Under load the proxy may fail and a NodeManager may answer late: no kill before ``am_stale_timeout``."""
    script = Script([UNREACHABLE], [node])
    times = [T0 + i * 5 for i in range(int(STALE / 5) + 2)]
    steps = follow(script, times)
    assert all(s.action is Action.NONE for s in steps[:-1]), [s.action for s in steps]
    assert steps[-1].action is Action.KILL_HUNG_AM
    assert steps[-1].result is not None and steps[-1].result.failure is not None
    assert steps[-1].result.failure.kind == KIND_HUNG_AM
    assert script.asked.count("am_node") >= 2


def test_a_stale_document_the_proxy_serves_never_looks_at_the_node() -> None:
    """The proxy reaches the AM, which publishes nothing new: a hung AM, judged by the old rule alone."""
    script = Script([live(1)], [LOST])
    times = [T0 + i * 5 for i in range(int(STALE / 5) + 2)]
    steps = follow(script, times)
    assert "am_node" not in script.asked
    assert steps[-1].action is Action.KILL_HUNG_AM


def test_a_proxy_that_reaches_the_am_again_restarts_the_unreachable_clock() -> None:
    script = Script([UNREACHABLE, UNREACHABLE, live(2), UNREACHABLE, UNREACHABLE], [LOST])
    steps = follow(script, [T0, T0 + 10, T0 + 12, T0 + 14, T0 + 14 + REACH - 1])
    assert all(s.action is Action.NONE for s in steps)
    assert "am_node" not in script.asked


def test_the_lost_node_is_named_before_a_hung_am_whose_stale_timeout_is_shorter() -> None:
    f = Follower(APP, startup_timeout=600.0, am_stale_timeout=10.0, am_unreachable_timeout=10.0)
    script = Script([UNREACHABLE], [LOST])
    follow_step(f, T0, script)
    step = follow_step(f, T0 + 11, script)
    assert step.action is Action.KILL_AM_NODE_LOST


# --------------------------------------------------------------------------- #
# HTTP: the proxy's 5xx, the RM's attempt and node, the NodeManager's probe
# --------------------------------------------------------------------------- #


class Cluster:
    """The RM (report, proxy, appattempts, nodes) and the AM's NodeManager over a MockTransport."""

    def __init__(self, *, proxy_status: int = 502, node_state: str = "RUNNING", nm: str = "refused") -> None:
        self.proxy_status, self.node_state, self.nm = proxy_status, node_state, nm
        self.killed: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.host == "nm2.example":
            if self.nm == "refused":
                raise httpx.ConnectError("Connection refused", request=request)
            if self.nm == "slow":
                raise httpx.ReadTimeout("timed out", request=request)
            return httpx.Response(200, json={"nodeInfo": {}})
        if path == f"/ws/v1/cluster/apps/{APP}":
            return httpx.Response(200, json={"app": {"state": "RUNNING", "finalStatus": "UNDEFINED"}})
        if path == f"/ws/v1/cluster/apps/{APP}/appattempts":
            attempts = [{"id": 1, "nodeId": "old:1", "nodeHttpAddress": "old:2"}]
            attempts.append({"id": 2, "nodeId": NODE, "nodeHttpAddress": NM_HTTP})
            return httpx.Response(200, json={"appAttempts": {"appAttempt": attempts}})
        if path == f"/ws/v1/cluster/nodes/{NODE}":
            node = {"id": NODE, "state": self.node_state, "nodeHTTPAddress": NM_HTTP}
            return httpx.Response(200, json={"node": node})
        if path == f"/proxy/{APP}/pages/tony/state":
            return httpx.Response(self.proxy_status, text="proxy error")
        return httpx.Response(404, text=f"unexpected {path}")


def blocking(cluster: Cluster) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(cluster.handle))


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_proxy_5xx_is_an_unreachable_am_and_anything_else_is_no_document(status: int) -> None:
    with pytest.raises(AmUnreachable, match=f"HTTP {status}"):
        web.fetch_state(httpx.Response(status, text="x", request=httpx.Request("GET", RM)))
    assert web.fetch_state(httpx.Response(404, text="x", request=httpx.Request("GET", RM))) is None
    ok = httpx.Response(200, html="<html>not running</html>", request=httpx.Request("GET", RM))
    assert web.fetch_state(ok) is None


@pytest.mark.parametrize(
    ("node_state", "nm", "lost"),
    [("RUNNING", "refused", True), ("LOST", "ok", True), ("UNHEALTHY", "ok", True), ("RUNNING", "slow", False)]
    + [("RUNNING", "ok", False), ("SHUTDOWN", "slow", True), ("DECOMMISSIONED", "ok", True)],
)
def test_read_am_node_reads_the_current_attempts_node_and_probes_its_nodemanager(
    node_state: str, nm: str, lost: bool
) -> None:
    node = read_am_node(blocking(Cluster(node_state=node_state, nm=nm)), RM, APP)
    assert (node.node_id, node.rm_state, node.http_address) == (NODE, node_state, NM_HTTP)
    assert node.lost is lost, node


def test_an_application_without_an_attempt_has_no_node_to_judge() -> None:
    with pytest.raises(ClusterError, match="no attempt"):
        am_node_of_attempts({"appAttempts": {"appAttempt": []}}, APP)
    with pytest.raises(ClusterError, match="names no node"):
        am_node_of_attempts({"appAttempts": {"appAttempt": [{"id": 1}]}}, APP)


class _Hook:
    def __init__(self, conn_id: str) -> None:
        self.killed: list[str] = []

    def kill(self, app_id: str) -> None:
        killed.append(app_id)

    def close(self) -> None:
        pass


killed: list[str] = []


@pytest.mark.parametrize(("nm", "kind"), [("refused", KIND_AM_NODE_LOST), ("ok", KIND_HUNG_AM)])
def test_the_trigger_carries_the_threshold_and_names_the_lost_node(
    monkeypatch: pytest.MonkeyPatch, nm: str, kind: str
) -> None:
    """Rebuilt from its serialised form, the trigger ends on the unreachable rule, not the stale one."""
    cluster = Cluster(nm=nm)
    monkeypatch.setattr(tony, "YarnHook", _Hook)
    monkeypatch.setattr(tony, "_cluster_of", lambda conn_id: (RM, web.HttpSettings()))
    monkeypatch.setattr(
        web, "async_http_client", lambda settings=None: httpx.AsyncClient(transport=httpx.MockTransport(cluster.handle))
    )
    killed.clear()
    stale = 0.3 if kind == KIND_HUNG_AM else 3600.0
    original = tony.TonyTrigger(
        app_id=APP,
        yarn_conn_id="c",
        poll_interval=0.01,
        startup_timeout=60.0,
        am_stale_timeout=stale,
        am_unreachable_timeout=0.05,
    )
    path, kwargs = original.serialize()
    assert kwargs["am_unreachable_timeout"] == 0.05
    rebuilt = tony.TonyTrigger(**kwargs)

    async def first() -> dict[str, Any]:
        async for event in rebuilt.run():
            return dict(event.payload)
        raise AssertionError("no event")

    event = TonyEvent.from_dict(asyncio.run(asyncio.wait_for(first(), timeout=30)), "event")
    assert event.result is not None and event.result.failure is not None
    assert event.result.failure.kind == kind and event.result.retryable
    if kind == KIND_AM_NODE_LOST:
        assert NODE in event.result.failure.message
    assert killed == [APP]
