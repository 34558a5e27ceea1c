"""TonyTriggers in one triggerer share one hook (one skein driver JVM) per connection."""
from __future__ import annotations

import asyncio

import pytest

from airflow_provider_tony.triggers import tony


class FakeHook:
    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(autouse=True)
def fake_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tony, "YarnHook", FakeHook)
    monkeypatch.setattr(tony, "_SHARED_HOOKS", {})
    monkeypatch.setattr(tony, "_USERS", tony.Counter())


def test_triggers_on_one_connection_share_a_hook_and_the_last_one_closes_it() -> None:
    first = tony._acquire_hook("tony_yarn_default")
    second = tony._acquire_hook("tony_yarn_default")
    other = tony._acquire_hook("other_cluster")
    assert first is second
    assert other is not first
    asyncio.run(tony._release_hook("tony_yarn_default"))
    assert first.closed == 0, "closed while another trigger still polls through it"
    asyncio.run(tony._release_hook("tony_yarn_default"))
    assert first.closed == 1
    assert other.closed == 0
    assert tony._acquire_hook("tony_yarn_default") is not first, "a closed hook must not be handed out again"
