"""Per-role placement: the spec field, the submit-time plan, the skein services, and task identity."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.executor import task_identity
from airflow_provider_tony.runtime.spec import JobSpec, Placement, task_of_container
from airflow_provider_tony.yarn.appspec import build_application_spec, plan_placement
from airflow_provider_tony.yarn.checks import ClusterInfo, cluster_info_from_rm, validate_against_cluster

HOSTS = {"localhost": [], "127.0.0.2": [], "127.0.0.3": ["gpu"]}


def spec(**roles: dict[str, Any]) -> JobSpec:
    return JobSpec.from_dict({"name": "p", "roles": {name: {"script": "t.py", **r} for name, r in roles.items()}})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("spread", Placement(spread=True)),
        (["a", "b"], Placement(nodes=["a", "b"])),
        ({"spread": True, "nodes": ["a", "b"]}, Placement(spread=True, nodes=["a", "b"])),
        (None, None),
    ],
)
def test_placement_shorthands(given: object, expected: Placement | None) -> None:
    assert spec(worker={"placement": given}).roles["worker"].placement == expected


@pytest.mark.parametrize(
    ("given", "field", "words"),
    [
        ("spreed", "roles.worker.placement", "'spreed' is not a placement"),
        (["ok", "has space"], "roles.worker.placement.nodes[1]", "'has space' is not a host name"),
        (["a", "a"], "roles.worker.placement.nodes", "lists a host twice"),
        (["h:8041"], "roles.worker.placement.nodes[0]", "without a port"),
        ({}, "roles.worker.placement.spread", "placement says nothing"),
        ({"spread": "yes"}, "roles.worker.placement.spread", "'yes' is not true or false"),
        ({"hosts": ["a"]}, "roles.worker.placement.hosts", "unknown key 'hosts'"),
    ],
)
def test_placement_errors_name_the_dotted_field(given: object, field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        spec(worker={"placement": given})
    assert err.value.field == field
    assert words in str(err.value)


def test_role_services_and_task_of_container_are_inverse() -> None:
    s = spec(worker={"instances": 3, "placement": "spread"}, ps={"instances": 2}, my_role={"instances": 2})
    assert s.role_services("worker") == ["worker.0", "worker.1", "worker.2"]
    assert s.role_services("ps") == ["ps"]
    assert [task_of_container(svc, 0) for svc in s.role_services("worker")] == ["worker:0", "worker:1", "worker:2"]
    assert task_of_container("ps", 1) == "ps:1"
    assert task_of_container("my_role", 1) == "my_role:1"
    assert task_identity({"SKEIN_CONTAINER_ID": "worker.2_0"}) == ("worker", 2)
    assert task_identity({"SKEIN_CONTAINER_ID": "my_role_1"}) == ("my_role", 1)


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        # unlabelled nodes only, round-robin
        ({"worker": {"instances": 2, "placement": "spread"}}, {"worker": ["127.0.0.2", "localhost"]}),
        ({"worker": {"instances": 3, "placement": "spread"}}, {"worker": ["127.0.0.2", "localhost", "127.0.0.2"]}),
        # the role's label picks the labelled node
        (
            {"worker": {"instances": 2, "node_label": "gpu", "placement": "spread"}},
            {"worker": ["127.0.0.3", "127.0.0.3"]},
        ),
        # listed nodes win, in the order given
        ({"worker": {"instances": 3, "placement": {"spread": True, "nodes": ["b", "a"]}}}, {"worker": ["b", "a", "b"]}),
        # dealing continues across roles: ps does not start on worker:0's node
        (
            {"worker": {"instances": 1, "placement": "spread"}, "ps": {"instances": 1, "placement": "spread"}},
            {"worker": ["127.0.0.2"], "ps": ["localhost"]},
        ),
        # a node list without spread needs no plan
        ({"worker": {"instances": 2, "placement": ["a"]}}, {}),
    ],
)
def test_plan_placement(roles: dict[str, Any], expected: dict[str, list[str]]) -> None:
    assert plan_placement(spec(**roles), HOSTS) == expected


def test_plan_placement_without_candidate_nodes_says_what_to_do() -> None:
    with pytest.raises(SpecError) as err:
        plan_placement(spec(worker={"instances": 2, "node_label": "fast", "placement": "spread"}), HOSTS)
    assert err.value.field == "roles.worker.placement.spread"
    assert "label 'fast'" in str(err.value) and "placement.nodes" in str(err.value)


def test_spread_role_becomes_one_pinned_service_per_task() -> None:
    s = spec(worker={"instances": 2, "placement": "spread"}, ps={"instances": 2, "placement": ["h1", "h2"]})
    app = build_application_spec(s, python="/usr/bin/python3", placement_plan=plan_placement(s, HOSTS))
    assert sorted(app.services) == ["ps", "worker.0", "worker.1", "worker.elsewhere"]
    assert app.services["worker.0"].nodes == ["127.0.0.2"] and app.services["worker.0"].instances == 1
    assert app.services["worker.1"].nodes == ["localhost"]
    assert app.services["ps"].nodes == ["h1", "h2"] and app.services["ps"].instances == 2
    # for a restart that moves a task off a lost node: empty at first, any node the role may use
    assert app.services["worker.elsewhere"].instances == 0 and app.services["worker.elsewhere"].nodes == []
    assert all(not svc.relax_locality for svc in app.services.values())


def test_spread_without_a_plan_is_refused() -> None:
    with pytest.raises(SpecError, match="no node plan"):
        build_application_spec(spec(worker={"instances": 2, "placement": "spread"}), python="/usr/bin/python3")


def test_unplaced_roles_are_unchanged() -> None:
    app = build_application_spec(spec(worker={"instances": 2}), python="/usr/bin/python3")
    assert list(app.services) == ["worker"] and app.services["worker"].nodes == []


def _cluster(hosts: dict[str, list[str]]) -> ClusterInfo:
    return ClusterInfo(
        max_memory_mb=8192,
        max_vcores=8,
        resource_types=["memory-mb", "vcores"],
        queues=["default"],
        total_memory_mb=8192,
        total_vcores=8,
        node_labels=["gpu"],
        hosts=hosts,
    )


def test_listed_nodes_must_be_running_and_carry_the_label() -> None:
    with pytest.raises(SpecError) as err:
        validate_against_cluster(spec(worker={"placement": ["localhost", "nope"]}), _cluster(HOSTS))
    assert err.value.field == "roles.worker.placement.nodes[1]" and "'nope' is not a running node" in str(err.value)
    with pytest.raises(SpecError) as err:
        validate_against_cluster(spec(worker={"node_label": "gpu", "placement": ["localhost"]}), _cluster(HOSTS))
    assert "does not carry the role's node_label 'gpu'" in str(err.value)
    validate_against_cluster(spec(worker={"node_label": "gpu", "placement": ["127.0.0.3"]}), _cluster(HOSTS))
    validate_against_cluster(spec(worker={"placement": ["anything"]}), _cluster({}))  # unknown: no check


def test_cluster_info_reads_running_hosts_and_their_labels() -> None:
    nodes = {
        "nodes": {
            "node": [
                {"nodeHostName": "a", "state": "RUNNING", "nodeLabels": ["gpu"]},
                {"nodeHostName": "b", "state": "RUNNING"},
                {"nodeHostName": "c", "state": "LOST"},
            ]
        }
    }
    info = cluster_info_from_rm({}, {}, None, nodes)
    assert info.hosts == {"a": ["gpu"], "b": []}
    one = cluster_info_from_rm({}, {}, None, {"nodes": {"node": {"nodeHostName": "a"}}})
    assert one.hosts == {"a": []}
    assert cluster_info_from_rm({}, {}, None).hosts == {}
