"""The AM's pacing: how often it reads skein's store and looks at the containers.

Pure logic (a stand-in for skein's application client): each read and each
look is a gRPC call that skein's AM serves on the nodes that train.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_tony.runtime import am as am_module
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.messages import TaskState
from airflow_provider_tony.runtime.spec import JobSpec


def _am(heartbeat_interval: float, running: bool = True) -> ApplicationMaster:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"instances": 1, "command": ["true"]}},
                              "heartbeat_interval": heartbeat_interval,
                              "heartbeat_timeout": 3 * heartbeat_interval})
    am = ApplicationMaster(SimpleNamespace(kv={}), spec, "application_1_0001")
    if running:
        for task in am.tracker.tasks.values():
            task.state = TaskState.RUNNING
    return am


@pytest.mark.parametrize(("interval", "starting", "running"), [(5.0, 0.25, 1.0), (1.0, 0.25, 1.0), (0.2, 0.1, 0.2)])
def test_the_store_is_read_quickly_while_tasks_start_then_once_a_beat_at_most_every_second(
        interval: float, starting: float, running: float) -> None:
    assert _am(interval, running=False).tick() == starting
    assert _am(interval).tick() == running


@pytest.mark.parametrize(("interval", "expected"), [(0.5, 1.0), (1.0, 1.0), (2.0, 2.0), (5.0, 5.0), (30.0, 5.0)])
def test_containers_are_looked_at_every_heartbeat_interval_between_one_and_five_seconds(
        interval: float, expected: float) -> None:
    calls: list[list[str]] = []
    am = _am(interval)
    am.app = SimpleNamespace(kv={}, get_containers=lambda states: calls.append(states) or [])
    am.check_containers(1000.0)
    am.check_containers(1000.0 + expected - 0.01)
    assert len(calls) == 1
    am.check_containers(1000.0 + expected)
    assert len(calls) == 2
    assert am_module.CONTAINER_CHECK_MIN_S <= am.container_check_interval() <= am_module.CONTAINER_CHECK_MAX_S
