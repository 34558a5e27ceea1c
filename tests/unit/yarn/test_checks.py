"""The submit-only checks (``yarn/checks.py``): the cluster's limits and the local files.

Pure data in, ``SpecError`` out: no cluster needed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.checks import (
    DOMINANT_CALCULATOR,
    ClusterInfo,
    cluster_info_from_rm,
    validate_against_cluster,
    validate_local_files,
)

MINIMAL: dict[str, Any] = {"roles": {"worker": {"module": "trainer.main"}}}


def _spec(mutate: Callable[[dict[str, Any]], object] | None = None) -> JobSpec:
    data = copy.deepcopy(MINIMAL)
    if mutate is not None:
        mutate(data)
    return JobSpec.from_dict(data)


def _role(**kw: Any) -> dict[str, Any]:
    return {"module": "trainer.main", **kw}


def _set_role(name: str, **kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["roles"].__setitem__(name, _role(**kw))


# --------------------------------------------------------------------------- #
# Against the cluster
# --------------------------------------------------------------------------- #
def _cluster(**kw: Any) -> ClusterInfo:
    base: dict[str, Any] = dict(
        max_memory_mb=8192,
        max_vcores=8,
        resource_types=["memory-mb", "vcores"],
        queues=["default", "gpu"],
        total_memory_mb=65536,
        total_vcores=64,
        node_labels=["fast"],
    )
    return ClusterInfo(**{**base, **kw})


def test_cluster_check_passes() -> None:
    spec = _spec(lambda d: d["roles"].update(worker=_role(instances=4, memory="8 GiB", vcores=8, node_label="fast")))
    validate_against_cluster(spec, _cluster())
    validate_against_cluster(_spec(lambda d: d.update(queue="root.gpu")), _cluster())
    validate_against_cluster(_spec(lambda d: d.update(queue="anything")), _cluster(queues=[]))
    gpu_spec = _spec(_set_role("worker", gpus=2))
    validate_against_cluster(gpu_spec, _cluster(resource_types=["memory-mb", "vcores", "yarn.io/gpu"]))


CLUSTER_INVALID: list[tuple[str, Callable[[dict[str, Any]], object], str, list[str]]] = [
    (
        "role-memory",
        _set_role("worker", memory=16384),
        "roles.worker.memory",
        ["16384", "8192", "yarn.scheduler.maximum-allocation-mb"],
    ),
    (
        "role-vcores",
        _set_role("worker", vcores=16),
        "roles.worker.vcores",
        ["16", "8 vcores", "yarn.scheduler.maximum-allocation-vcores"],
    ),
    ("am-memory", lambda d: d.update(am_memory=9000), "am_memory", ["9000", "8192", "maximum-allocation-mb"]),
    ("am-vcores", lambda d: d.update(am_vcores=9), "am_vcores", ["9", "maximum-allocation-vcores"]),
    ("gpus", _set_role("worker", gpus=1), "roles.worker.gpus", ["1 GPUs", "no GPU resource type", "gpus=0"]),
    ("queue", lambda d: d.update(queue="nope"), "queue", ["'nope'", "'default'", "'gpu'"]),
    ("node-label", _set_role("worker", node_label="slow"), "roles.worker.node_label", ["'slow'", "'fast'"]),
    ("total-memory", _set_role("worker", instances=9, memory=8192), "roles", ["74240 MiB", "65536"]),
]


@pytest.mark.parametrize("mutate, field, texts", [c[1:] for c in CLUSTER_INVALID], ids=[c[0] for c in CLUSTER_INVALID])
def test_cluster_check_rejects(mutate: Callable[[dict[str, Any]], object], field: str, texts: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        validate_against_cluster(_spec(mutate), _cluster())
    assert info.value.field == field
    for text in texts:
        assert text in str(info.value)


DOMINANT = f"org.apache.hadoop.yarn.util.resource.{DOMINANT_CALCULATOR}"
DEFAULT = "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator"
#: 40 workers of 1 vcore (+ the AM's) on a 16-vcore cluster with memory to spare.
MANY_VCORES = _set_role("worker", instances=40, memory=256, vcores=1)


def test_total_vcores_refuse_where_the_scheduler_counts_them() -> None:
    with pytest.raises(SpecError) as info:
        validate_against_cluster(_spec(MANY_VCORES), _cluster(total_vcores=16, resource_calculator=DOMINANT))
    assert info.value.field == "roles"
    assert "41 vcores" in str(info.value) and "16" in str(info.value) and DOMINANT_CALCULATOR in str(info.value)


@pytest.mark.parametrize("calculator", [DEFAULT, None], ids=["default-calculator", "unknown"])
def test_total_vcores_only_warn_where_containers_are_placed_by_memory(calculator: str | None) -> None:
    warnings = validate_against_cluster(_spec(MANY_VCORES), _cluster(total_vcores=16, resource_calculator=calculator))
    assert len(warnings) == 1 and "41 vcores" in warnings[0] and "submitted anyway" in warnings[0]
    assert ("memory alone" in warnings[0]) == (calculator == DEFAULT)
    # Memory is counted by every calculator: the total memory still refuses.
    with pytest.raises(SpecError, match="MiB in total"):
        validate_against_cluster(
            _spec(_set_role("worker", instances=40, memory=2048)), _cluster(resource_calculator=calculator)
        )


def test_a_job_within_the_vcores_has_no_warning() -> None:
    assert validate_against_cluster(_spec(), _cluster(resource_calculator=DOMINANT)) == []


def test_the_calculator_comes_from_the_conf_dir_else_the_schedulers_answer() -> None:
    scheduler = {"maximumAllocation": {"memory": 1024, "vCores": 1}}
    assert cluster_info_from_rm(scheduler, {}, None).schedules_vcores is None
    assert cluster_info_from_rm(scheduler, {}, None, resource_calculator=DOMINANT).schedules_vcores is True
    assert cluster_info_from_rm(scheduler, {}, None, resource_calculator=DEFAULT).schedules_vcores is False
    told = {**scheduler, "resourceCalculator": DOMINANT}
    assert cluster_info_from_rm(told, {}, None).schedules_vcores is True
    assert cluster_info_from_rm(told, {}, None, resource_calculator=DEFAULT).schedules_vcores is False


def test_the_client_reads_the_calculator_from_capacity_scheduler_xml(tmp_path: Path) -> None:
    from airflow_provider_tony.yarn.checks import RESOURCE_CALCULATOR_KEY
    from airflow_provider_tony.yarn.cluster_access import read_site

    (tmp_path / "capacity-scheduler.xml").write_text(
        f"<configuration><property><name>{RESOURCE_CALCULATOR_KEY}</name><value>{DOMINANT}</value></property>"
        "</configuration>"
    )
    assert read_site(str(tmp_path), "capacity-scheduler.xml", RESOURCE_CALCULATOR_KEY) == DOMINANT


# --------------------------------------------------------------------------- #
# Local files
# --------------------------------------------------------------------------- #
@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "run.py").write_text("")
    (tmp_path / "env.tar.gz").write_bytes(b"")
    return tmp_path


def _local_spec(tree: Path, **changes: Any) -> JobSpec:
    data: dict[str, Any] = {
        "python": {"archive": str(tree / "env.tar.gz")},
        "files": {
            "train.py": str(tree / "train.py"),
            "code": str(tree / "pkg"),
            "remote": "hdfs:///user/me/remote",
        },
        "roles": {
            "chief": {"script": "train.py"},
            "worker": {"script": "code/sub/run.py"},
            "evaluator": {"script": "remote/eval.py"},
            "ps": {"script": str(tree / "train.py")},
        },
    }
    data.update(changes)
    return JobSpec.from_dict(data)


def test_local_files_pass(tree: Path) -> None:
    validate_local_files(_local_spec(tree))
    validate_local_files(_local_spec(tree, python={"archive": "hdfs:///envs/missing.tar.gz"}))


@pytest.mark.parametrize(
    "changes, field, value",
    [
        ({"files": {"train.py": "/nonexistent/train.py"}}, "files.train.py", "/nonexistent/train.py"),
        ({"python": {"archive": "/nonexistent/env.tar.gz"}}, "python.archive", "/nonexistent/env.tar.gz"),
        ({"roles": {"worker": {"script": "missing.py"}}}, "roles.worker.script", "missing.py"),
        ({"roles": {"worker": {"script": "code/sub/missing.py"}}}, "roles.worker.script", "code/sub/missing.py"),
        ({"roles": {"worker": {"script": "/nonexistent/run.py"}}}, "roles.worker.script", "/nonexistent/run.py"),
    ],
)
def test_local_files_missing(tree: Path, changes: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_local_files(_local_spec(tree, **changes))
    assert info.value.field == field
    assert repr(value) in str(info.value)
    assert "file not found" in str(info.value)


def test_cluster_info_is_read_from_the_resource_managers_answers() -> None:
    scheduler = {
        "queueName": "root",
        "maximumAllocation": {
            "memory": 8192,
            "vCores": 4,
            "resourceInformations": {
                "resourceInformation": [{"name": "memory-mb"}, {"name": "vcores"}, {"name": "yarn.io/gpu"}]
            },
        },
        "queues": {
            "queue": [{"queueName": "default"}, {"queueName": "team", "queues": {"queue": [{"queueName": "gpu"}]}}]
        },
    }
    metrics = {"totalMB": 24576, "totalVirtualCores": 12}
    info = cluster_info_from_rm(scheduler, metrics, {"nodeLabelInfo": {"name": "fast"}})
    assert info == ClusterInfo(
        max_memory_mb=8192,
        max_vcores=4,
        resource_types=["memory-mb", "vcores", "yarn.io/gpu"],
        queues=["default", "gpu"],
        total_memory_mb=24576,
        total_vcores=12,
        node_labels=["fast"],
    )
    bare = cluster_info_from_rm({"maximumAllocation": {"memory": 1024, "vCores": 1}}, {}, None)
    assert bare.resource_types == ["memory-mb", "vcores"] and bare.node_labels == [] and bare.queues == []
