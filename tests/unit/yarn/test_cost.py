"""The run's cost from the ResourceManager's report (``yarn/http.py``'s ``parse_cost``, ``Cost``).

The JSON shapes are YARN's: JAXB writes ``resourceSecondsMap`` as ``{"entry": {...}}`` for one
resource and ``{"entry": [...]}`` for several; the scalar ``memorySeconds``/``vcoreSeconds`` are the
older fields. A report of an application whose AM unregistered says FINISHED while its container
still runs (and counts): only a report with no running container is final.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.messages import Cost
from airflow_provider_tony.yarn.follower import JobResult
from airflow_provider_tony.yarn.http import parse_app_report, parse_cost


def app(**fields: Any) -> dict[str, Any]:
    return {"state": "FINISHED", "finalStatus": "SUCCEEDED", "runningContainers": -1, **fields}


def test_one_resource_as_one_entry_and_the_scalars_for_the_rest() -> None:
    cost = parse_cost(
        app(memorySeconds=63988, vcoreSeconds=3, resourceSecondsMap={"entry": {"key": "vcores", "value": "77"}})
    )
    assert (cost.vcore_seconds, cost.memory_mb_seconds, cost.gpu_seconds) == (77, 63988, 0)
    assert cost.final


def test_several_resources_gpus_and_the_preempted_share() -> None:
    cost = parse_cost(
        app(
            resourceSecondsMap={
                "entry": [
                    {"key": "memory-mb", "value": "2048"},
                    {"key": "vcores", "value": "4"},
                    {"key": "yarn.io/gpu", "value": "9"},
                ]
            },
            preemptedResourceSecondsMap={
                "entry": [{"key": "memory-mb", "value": "512"}, {"key": "yarn.io/gpu", "value": "1"}]
            },
            preemptedVcoreSeconds=2,
        )
    )
    assert cost.to_dict() == {
        "vcore_seconds": 4,
        "memory_mb_seconds": 2048,
        "gpu_seconds": 9,
        "preempted_vcore_seconds": 2,
        "preempted_memory_mb_seconds": 512,
        "preempted_gpu_seconds": 1,
        "final": True,
    }
    assert "(preempted: 2 vcore-seconds, 512 MB-seconds, 1 GPU-seconds)" in cost.line()
    assert "preempted" not in Cost(vcore_seconds=1).line()


@pytest.mark.parametrize(
    ("fields", "final"),
    [
        ({"runningContainers": 1}, False),  # FINISHED while the AM container still runs: still counting
        ({"runningContainers": 0}, True),
        ({"runningContainers": None}, True),
        ({"state": "RUNNING", "runningContainers": -1}, False),
        ({"state": "KILLED"}, True),
        ({"state": "FAILED"}, True),
    ],
)
def test_only_a_report_with_nothing_running_is_final(fields: dict[str, Any], final: bool) -> None:
    assert parse_cost(app(**fields)).final is final


@pytest.mark.parametrize(
    "raw",
    [
        {"resourceSecondsMap": {"entry": [{"key": "vcores", "value": "x"}, "junk", {"value": 3}]}},
        {"resourceSecondsMap": "junk", "vcoreSeconds": -5, "memorySeconds": "many"},
        {"resourceSecondsMap": {"entry": {"key": "vcores", "value": "-3"}}},
        {},
    ],
)
def test_what_is_not_a_count_counts_as_nothing(raw: dict[str, Any]) -> None:
    cost = parse_cost(app(**raw))
    assert (cost.vcore_seconds, cost.memory_mb_seconds, cost.gpu_seconds) == (0, 0, 0)


def test_the_report_carries_the_cost_into_the_result_and_back() -> None:
    data = {"app": app(memorySeconds=10, resourceSecondsMap={"entry": {"key": "vcores", "value": "2"}})}
    report = parse_app_report(data, "application_1_0001", "http://rm/app")
    result = JobResult.from_report(report)
    assert result.cost is not None and result.cost.vcore_seconds == 2 and result.cost.memory_mb_seconds == 10
    again = JobResult.from_dict(result.to_dict(), "result")  # the trigger's event carries it so
    assert again.cost == result.cost
