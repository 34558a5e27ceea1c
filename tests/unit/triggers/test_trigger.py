"""``TonyTrigger`` against a fake cluster over HTTP: what it yields, and what it starts.

The trigger's own loop, the HTTP parsing and the ``Follower`` run for real;
only the network is an ``httpx.MockTransport`` answering as the RM's REST API
and the AM's proxied routes do, and the hook (used only to kill) is a fake
that counts the skein drivers it would start.
"""

from __future__ import annotations

import asyncio
import http.server
import importlib
import json
import threading
import time
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.messages import StateDocument, TaskSummary
from airflow_provider_tony.triggers import tony
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.follower import TonyEvent

APP = "application_1700000000000_0042"
RM = "http://rm:8088"
DOC = StateDocument(
    application_id=APP, app_state="SUCCEEDED", seq=7, final=True, tasks={"worker:0": TaskSummary(state="SUCCEEDED")}
)


class FakeCluster:
    """Scripted YARN states (one per report) and state documents (one per read)."""

    def __init__(self, states: list[str], documents: list[StateDocument | None] | None = None) -> None:
        self.states = states
        self.documents = documents or [None]
        self.requests: list[tuple[str, str]] = []
        self.fail: Exception | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        if self.fail is not None:
            raise self.fail
        path = request.url.path
        if path == f"/ws/v1/cluster/apps/{APP}":
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            final = {"FINISHED": "SUCCEEDED"}.get(state, "UNDEFINED")
            return httpx.Response(
                200,
                json={
                    "app": {"state": state, "finalStatus": final, "diagnostics": "done" if final != "UNDEFINED" else ""}
                },
            )
        if path == f"/proxy/{APP}/pages/tony/state":
            doc = self.documents.pop(0) if len(self.documents) > 1 else self.documents[0]
            return httpx.Response(200, json={} if doc is None else doc.to_dict())
        if path == f"/proxy/{APP}/pages/tony/ack":
            return httpx.Response(200, text="ok")
        return httpx.Response(404, text="no")


class FakeHook:
    """Counts the hooks (each one a skein driver JVM once used) the trigger creates, and kills."""

    instances: list[FakeHook] = []

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self.killed: list[str] = []
        self.closed = 0
        FakeHook.instances.append(self)

    def kill(self, app_id: str) -> None:
        self.killed.append(app_id)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tony, "YarnHook", FakeHook)
    monkeypatch.setattr(FakeHook, "instances", [])
    monkeypatch.setattr(tony, "_cluster_of", lambda conn_id: (RM, web.HttpSettings()))


def with_cluster(monkeypatch: pytest.MonkeyPatch, cluster: FakeCluster) -> None:
    monkeypatch.setattr(
        web, "async_http_client", lambda settings=None: httpx.AsyncClient(transport=httpx.MockTransport(cluster.handle))
    )


def trigger(**kwargs: Any) -> TonyTrigger:
    args = {
        "app_id": APP,
        "yarn_conn_id": "tony_yarn_other",
        "poll_interval": 0.0,
        "startup_timeout": 321.0,
        "am_stale_timeout": 45.5,
        **kwargs,
    }
    return TonyTrigger(**args)


async def events_of(trig: TonyTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trig.run()]


def test_serialize_round_trips_with_non_default_values() -> None:
    original = trigger(
        poll_interval=7.25, started_at=1_700_000_000.5, last_heard_at=1_700_000_040.25, am_unreachable_timeout=9.5
    )
    path, kwargs = original.serialize()
    json.dumps(kwargs)  # the triggerer stores it: primitives only
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert type(rebuilt) is TonyTrigger
    assert rebuilt.serialize() == (path, kwargs)
    assert kwargs == {
        "app_id": APP,
        "yarn_conn_id": "tony_yarn_other",
        "poll_interval": 7.25,
        "startup_timeout": 321.0,
        "am_stale_timeout": 45.5,
        "rm_outage_timeout": 600.0,
        "am_unreachable_timeout": 9.5,
        "started_at": 1_700_000_000.5,
        "last_heard_at": 1_700_000_040.25,
    }


class FakeClock:
    """The trigger's clocks (wall and monotonic, 1000 s apart); each YARN report takes 5 s."""

    def __init__(self, wall: float) -> None:
        self.now = wall

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - 1000.0


def test_a_trigger_recreated_from_its_serialised_form_keeps_the_startup_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A triggerer restart 50 s into a 60 s start-up timeout leaves 10 s, not a fresh 60 s."""
    clock = FakeClock(wall=1_700_000_000.0)
    monkeypatch.setattr(tony, "time", clock)
    path, kwargs = trigger(startup_timeout=60.0).serialize()  # deferred at T0
    clock.now += 50.0  # the triggerer restarts 50 s later and re-creates the trigger
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**json.loads(json.dumps(kwargs)))
    cluster = FakeCluster(["ACCEPTED"])
    handle = cluster.handle

    def slow_report(request: httpx.Request) -> httpx.Response:
        clock.now += 5.0
        return handle(request)

    cluster.handle = slow_report  # type: ignore[method-assign]
    with_cluster(monkeypatch, cluster)
    events = asyncio.run(asyncio.wait_for(events_of(rebuilt), timeout=30))
    event = TonyEvent.from_dict(events[0], "event")
    assert event.result is not None and "(startup_timeout)" in event.result.diagnostics
    assert clock.now - 1_700_000_000.0 <= 70.0, "the deadline counted from the restart, not from the deferral"
    (hook,) = FakeHook.instances
    assert hook.killed == [APP]


def test_the_trigger_keeps_when_it_last_heard_from_the_am_for_its_serialised_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(wall=1_700_000_000.0)
    monkeypatch.setattr(tony, "time", clock)
    running = StateDocument(application_id=APP, app_state="RUNNING", seq=3)
    cluster = FakeCluster(["RUNNING", "RUNNING", "FINISHED"], [running, running, DOC])
    with_cluster(monkeypatch, cluster)
    trig = trigger()
    asyncio.run(asyncio.wait_for(events_of(trig), timeout=30))
    assert trig.serialize()[1]["last_heard_at"] == 1_700_000_000.0


def test_follows_over_http_acks_the_verdict_and_yields_one_done_event_without_a_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster(["ACCEPTED", "RUNNING", "RUNNING", "FINISHED"], [DOC])
    with_cluster(monkeypatch, cluster)
    events = asyncio.run(events_of(trigger()))
    assert len(events) == 1
    event = TonyEvent.from_dict(events[0], "event")  # what execute_complete rebuilds from it
    assert (event.status, event.app_id) == (TonyEvent.DONE, APP)
    assert event.result is not None and event.result.succeeded and event.result.am_state == DOC
    assert ("GET", f"/proxy/{APP}/pages/tony/ack") in cluster.requests
    assert FakeHook.instances == [], "following must not create a hook (a skein driver JVM)"


def test_a_transport_error_that_outlasts_the_outage_timeout_is_one_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(["RUNNING"])
    cluster.fail = httpx.ConnectError("connection refused")
    with_cluster(monkeypatch, cluster)
    events = asyncio.run(asyncio.wait_for(events_of(trigger(rm_outage_timeout=0.0, poll_interval=0.01)), 30))
    assert len(events) == 1
    event = TonyEvent.from_dict(events[0], "event")
    assert (event.status, event.app_id, event.result) == (TonyEvent.ERROR, APP, None)
    assert f"no report for {APP}: ResourceManager at {RM} unreachable" in event.message


def test_a_hung_am_is_killed_through_a_driver_started_for_the_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(["RUNNING"], [None])  # RUNNING, but the AM never serves a document
    with_cluster(monkeypatch, cluster)
    events = asyncio.run(asyncio.wait_for(events_of(trigger(am_stale_timeout=0.0)), timeout=30))
    event = TonyEvent.from_dict(events[0], "event")
    assert event.result is not None and "hung AM" in event.result.diagnostics
    (hook,) = FakeHook.instances
    assert hook.killed == [APP] and hook.closed == 1


def test_the_trigger_can_be_cancelled_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(["RUNNING"], [DOC.__class__(application_id=APP, seq=1)])
    with_cluster(monkeypatch, cluster)

    async def scenario() -> None:
        task = asyncio.create_task(events_of(trigger(poll_interval=3600.0)))

        async def polled() -> None:
            while not cluster.requests:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(polled(), timeout=30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert FakeHook.instances == []


def test_on_kill_kills_with_a_hook_of_its_own_and_closes_it() -> None:
    asyncio.run(trigger().on_kill())
    (hook,) = FakeHook.instances
    assert hook.killed == [APP] and hook.closed == 1


def test_on_kill_closes_its_hook_even_when_the_kill_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: FakeHook, app_id: str) -> None:
        raise RuntimeError(f"could not kill {app_id}")

    monkeypatch.setattr(FakeHook, "kill", refuse)
    with pytest.raises(RuntimeError, match="could not kill"):
        asyncio.run(trigger().on_kill())
    (hook,) = FakeHook.instances
    assert hook.closed == 1


class _CountingHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET over a keep-alive HTTP/1.1 connection and records the client's port,
    one port per TCP connection."""

    protocol_version = "HTTP/1.1"
    ports: list[int] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).ports.append(self.client_address[1])
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def counting_server() -> Any:
    _CountingHandler.ports = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", _CountingHandler.ports
    server.shutdown()
    server.server_close()


def _idle(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Make the connection pool believe ``seconds`` passed since its last request (no sleeping)."""
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + seconds)


def test_followers_keep_their_connection_between_polls_of_the_default_interval(
    counting_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx drops an idle connection after 5 s by default, the default poll interval: every
    poll then paid a new connection (TCP, TLS, SPNEGO). Ours survive an idle poll interval,
    seen from the server: the second poll arrives on the first poll's connection."""
    from airflow_provider_tony.operators.tony import TonyOperator

    url, ports = counting_server
    idle = 1.5 * TonyOperator(task_id="t", job={"roles": {"w": {"command": ["true"]}}}).poll_interval

    def two_polls(client: httpx.Client) -> list[int]:
        start = len(ports)
        with client:
            client.get(url)
            with monkeypatch.context() as m:
                _idle(m, idle)
                client.get(url)
        return ports[start:]

    plain = two_polls(httpx.Client())
    assert len(plain) == 2 and plain[0] != plain[1], "httpx's default kept the connection: the test proves nothing"
    ours = two_polls(web.http_client())
    assert len(ours) == 2 and ours[0] == ours[1], "the idle connection was dropped between two polls"

    async def two_async_polls() -> list[int]:
        start = len(ports)
        async with web.async_http_client() as client:
            await client.get(url)
            with monkeypatch.context() as m:
                _idle(m, idle)
                await client.get(url)
        return ports[start:]

    ours_async = asyncio.run(two_async_polls())
    assert len(ours_async) == 2 and ours_async[0] == ours_async[1], "the trigger's client dropped it"
