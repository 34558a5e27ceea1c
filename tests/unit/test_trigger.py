"""``TonyTrigger`` on a fake hook: what it yields, and that it never leaks a hook (a skein driver JVM).

The fake stands in for the hook and its client only; the trigger's own loop,
its shared-hook bookkeeping and its kill path run for real.
"""
from __future__ import annotations

import asyncio
import importlib
import json
from typing import Any

import pytest

from airflow_provider_tony.triggers import tony
from airflow_provider_tony.triggers.tony import TonyTrigger
from airflow_provider_tony.yarn.client import JobResult
from airflow_provider_tony.yarn.follower import Follower, TonyEvent

APP = "application_1700000000000_0042"
RESULT = JobResult(APP, "FINISHED", "SUCCEEDED", "done", f"http://rm:8088/cluster/app/{APP}",
                   {"seq": 7, "tasks": {"worker:0": {"state": "SUCCEEDED"}}})


class FakeClient:
    """``TonyClient.poll`` answers from a script: a JobResult, None (still running) or an exception."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def poll(self, *args: Any, **kwargs: Any) -> JobResult | None:
        self.calls.append((args, kwargs))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeHook:
    instances: list[FakeHook] = []
    answers: list[Any] = [None]

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self.client = FakeClient(FakeHook.answers)
        self.closed = 0
        self.killed: list[str] = []
        FakeHook.instances.append(self)

    def get_conn(self) -> FakeClient:
        assert not self.closed, "polled through a closed hook"
        return self.client

    def kill(self, app_id: str) -> None:
        assert not self.closed, "killed through a closed hook"
        self.killed.append(app_id)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(autouse=True)
def fake_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tony, "YarnHook", FakeHook)
    monkeypatch.setattr(tony, "_SHARED_HOOKS", {})
    monkeypatch.setattr(tony, "_USERS", tony.Counter())
    monkeypatch.setattr(FakeHook, "instances", [])


def trigger(**kwargs: Any) -> TonyTrigger:
    args = {"app_id": APP, "yarn_conn_id": "tony_yarn_other", "poll_interval": 0.0, "startup_timeout": 321.0,
            "am_stale_timeout": 45.5, **kwargs}
    return TonyTrigger(**args)


async def events_of(trig: TonyTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trig.run()]


def test_serialize_round_trips_with_non_default_values() -> None:
    original = trigger(poll_interval=7.25)
    path, kwargs = original.serialize()
    json.dumps(kwargs)  # the triggerer stores it: primitives only
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert type(rebuilt) is TonyTrigger
    assert rebuilt.serialize() == (path, kwargs)
    assert kwargs == {"app_id": APP, "yarn_conn_id": "tony_yarn_other", "poll_interval": 7.25,
                      "startup_timeout": 321.0, "am_stale_timeout": 45.5}


def test_a_pending_poll_then_one_done_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeHook, "answers", [None, None, RESULT])
    events = asyncio.run(events_of(trigger()))
    assert len(events) == 1
    event = TonyEvent.from_dict(events[0], "event")  # what execute_complete rebuilds from it
    assert (event.status, event.app_id, event.result) == (TonyEvent.DONE, APP, RESULT)
    (hook,) = FakeHook.instances
    assert len(hook.client.calls) == 3
    followers = {id(args[0]) for args, _ in hook.client.calls}
    assert len(followers) == 1, "each poll must see the same Follower, or staleness is never noticed"
    for args, _ in hook.client.calls:
        follower = args[0]
        assert isinstance(follower, Follower) and follower.app_id == APP
        assert follower.startup_timeout == 321.0 and follower.am_stale_timeout == 45.5


def test_an_exception_while_polling_is_one_error_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeHook, "answers", [None, ConnectionError("ResourceManager at http://rm:8088 unreachable")])
    events = asyncio.run(events_of(trigger()))
    assert len(events) == 1
    event = TonyEvent.from_dict(events[0], "event")
    assert (event.status, event.app_id, event.result) == (TonyEvent.ERROR, APP, None)
    assert event.message == "ResourceManager at http://rm:8088 unreachable"


@pytest.mark.parametrize("answers", [[RESULT], [RuntimeError("boom")]], ids=["done", "error"])
def test_the_shared_hook_is_released_when_the_trigger_ends(monkeypatch: pytest.MonkeyPatch,
                                                           answers: list[Any]) -> None:
    monkeypatch.setattr(FakeHook, "answers", answers)
    events = asyncio.run(events_of(trigger()))
    assert len(events) == 1
    (hook,) = FakeHook.instances
    assert hook.closed == 1
    assert tony._SHARED_HOOKS == {} and not tony._USERS


def test_the_shared_hook_is_released_when_the_trigger_is_cancelled() -> None:
    async def scenario() -> FakeHook:
        trig = trigger(poll_interval=3600.0)  # polls once, then waits: only a cancel ends it
        task = asyncio.create_task(events_of(trig))

        async def polled() -> None:
            while not (FakeHook.instances and FakeHook.instances[0].client.calls):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(polled(), timeout=30)
        hook = FakeHook.instances[0]
        assert hook.closed == 0, "closed while the trigger still runs"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return hook

    hook = asyncio.run(scenario())
    assert hook.closed == 1
    assert tony._SHARED_HOOKS == {} and not tony._USERS


def test_two_triggers_on_one_connection_poll_through_one_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeHook, "answers", [None, RESULT])

    async def both() -> list[list[dict[str, Any]]]:
        return list(await asyncio.gather(events_of(trigger()), events_of(trigger(app_id=APP + "1"))))

    first, second = asyncio.run(both())
    assert first[0]["status"] == second[0]["status"] == "done"
    assert len(FakeHook.instances) == 1, "one driver JVM per connection per triggerer"
    assert FakeHook.instances[0].closed == 1


def test_on_kill_kills_with_a_hook_of_its_own_and_leaves_the_shared_one_open() -> None:
    shared = tony._acquire_hook("tony_yarn_other")  # another trigger still polls through it

    asyncio.run(trigger().on_kill())
    own = [h for h in FakeHook.instances if h is not shared]
    assert len(own) == 1, "on_kill must not use (and so must not close) the shared hook"
    assert own[0].killed == [APP] and own[0].closed == 1
    assert shared.killed == [] and shared.closed == 0
    assert tony._SHARED_HOOKS == {"tony_yarn_other": shared}


def test_on_kill_closes_its_hook_even_when_the_kill_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: FakeHook, app_id: str) -> None:
        raise RuntimeError(f"could not kill {app_id}")

    monkeypatch.setattr(FakeHook, "kill", refuse)
    with pytest.raises(RuntimeError, match="could not kill"):
        asyncio.run(trigger().on_kill())
    (hook,) = FakeHook.instances
    assert hook.closed == 1
