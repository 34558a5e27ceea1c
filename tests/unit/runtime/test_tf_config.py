"""Properties of the TF_CONFIG built for each task.

The tests check what TensorFlow relies on (every member sees one identical
cluster, each task finds itself at cluster[type][index]) rather than copying
expected dicts, so they hold for any layout in the tables.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_tony.runtime.errors import TonyError
from airflow_provider_tony.runtime.tf_config import (
    TF_CLUSTER_ROLES,
    TfConfigError,
    build_cluster,
    build_tf_config,
    parse_task_id,
    tf_config_env,
)


def layout(**counts: int) -> dict[str, str]:
    """Addresses for ``counts`` tasks per role, inserted in scrambled order.

    Reverse insertion order proves the cluster lists are ordered by index,
    not by the order the application master happened to learn addresses.
    """
    addresses: dict[str, str] = {}
    host = 0
    for role, count in counts.items():
        for index in reversed(range(count)):
            host += 1
            addresses[f"{role}:{index}"] = f"node{host}.example:{2000 + host}"
    return addresses


LAYOUTS = {
    # MultiWorkerMirroredStrategy
    "mwms-2-workers": layout(worker=2),
    "mwms-4-workers": layout(worker=4),
    "mwms-chief-2-workers": layout(chief=1, worker=2),
    "mwms-chief-4-workers": layout(chief=1, worker=4),
    # ParameterServerStrategy
    "ps-chief-2w-1ps": layout(chief=1, worker=2, ps=1),
    "ps-chief-3w-2ps": layout(chief=1, worker=3, ps=2),
    # with non-cluster roles alongside
    "ps-chief-3w-2ps-eval-tb": layout(chief=1, worker=3, ps=2, evaluator=1, tensorboard=1),
    "mwms-4-workers-eval-data": layout(worker=4, evaluator=1, data=2),
}

layouts = pytest.mark.parametrize("addresses", list(LAYOUTS.values()), ids=list(LAYOUTS))


def members(addresses: dict[str, str]) -> list[str]:
    return [t for t in addresses if t.split(":")[0] in TF_CLUSTER_ROLES]


@layouts
def test_every_member_sees_the_identical_cluster(addresses: dict[str, str]) -> None:
    clusters = [build_tf_config(addresses, t)["cluster"] for t in members(addresses)]
    assert clusters
    assert all(c == clusters[0] for c in clusters)
    assert clusters[0] == build_cluster(addresses)


@layouts
def test_each_member_is_unique_and_finds_itself(addresses: dict[str, str]) -> None:
    pairs = set()
    for task_id in members(addresses):
        config = build_tf_config(addresses, task_id)
        task = config["task"]
        pair = (task["type"], task["index"])
        assert pair not in pairs
        pairs.add(pair)
        assert config["cluster"][task["type"]][task["index"]] == addresses[task_id]
    cluster = build_cluster(addresses)
    assert pairs == {(role, i) for role, addrs in cluster.items() for i in range(len(addrs))}


@layouts
def test_cluster_holds_only_cluster_roles_with_all_their_tasks(addresses: dict[str, str]) -> None:
    cluster = build_cluster(addresses)
    assert set(cluster) <= set(TF_CLUSTER_ROLES)
    assert sum(len(v) for v in cluster.values()) == len(members(addresses))


@layouts
def test_evaluator_is_outside_the_cluster(addresses: dict[str, str]) -> None:
    with_eval = {**addresses, "evaluator:0": "evalhost:9999"}
    config = build_tf_config(with_eval, "evaluator:0")
    assert config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in config["cluster"]
    member_cluster = build_tf_config(with_eval, members(addresses)[0])["cluster"]
    assert config["cluster"] == member_cluster


@pytest.mark.parametrize("task_id", ["tensorboard:0", "data:0", "data:1"])
def test_non_tensorflow_roles_get_no_tf_config(task_id: str) -> None:
    addresses = {**layout(chief=1, worker=2), "tensorboard:0": "tb:6006", "data:0": "d:1", "data:1": "d:2"}
    assert build_tf_config(addresses, task_id) is None
    assert tf_config_env(addresses, task_id) == {}


@layouts
def test_tf_config_env_is_the_json_of_the_config(addresses: dict[str, str]) -> None:
    for task_id in members(addresses):
        env = tf_config_env(addresses, task_id)
        assert set(env) == {"TF_CONFIG"}
        assert json.loads(env["TF_CONFIG"]) == build_tf_config(addresses, task_id)


@pytest.mark.parametrize(
    ("addresses", "fragment"),
    [
        ({"worker:0": "a:1", "worker:2": "c:1"}, "missing index 1"),
        ({"worker:1": "a:1", "worker:2": "b:1"}, "missing index 0"),
        ({"chief:0": "a:1", "worker:0": "b:1", "ps:1": "c:1"}, "'ps'"),
        ({"worker:0": "a:1", "worker:01": "b:1"}, "non-canonical"),
        ({"worker": "a:1"}, "role:index"),
        ({"worker:x": "a:1"}, "role:index"),
        ({":0": "a:1"}, "role:index"),
        ({"worker:-1": "a:1"}, "role:index"),
    ],
    ids=["gap", "no-zero", "ps-gap", "leading-zero", "no-index", "bad-index", "no-role", "negative"],
)
def test_bad_task_ids_are_refused(addresses: dict[str, str], fragment: str) -> None:
    with pytest.raises(TfConfigError, match=fragment) as info:
        build_cluster(addresses)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, TonyError)


def test_gap_message_names_role_and_missing_index() -> None:
    with pytest.raises(ValueError) as info:
        build_cluster({"worker:0": "a:1", "worker:1": "b:1", "worker:3": "d:1"})
    message = str(info.value)
    assert "'worker'" in message and "worker:2" in message


def test_gaps_in_non_cluster_roles_are_ignored() -> None:
    addresses = {"worker:0": "a:1", "tensorboard:3": "tb:1"}
    assert build_cluster(addresses) == {"worker": ["a:1"]}


@pytest.mark.parametrize("task_id", ["worker:5", "chief:0", "evaluator:0"])
def test_unknown_task_id_raises(task_id: str) -> None:
    with pytest.raises(ValueError, match="has no address"):
        build_tf_config(layout(worker=2), task_id)


def test_every_executor_fails_alike_on_a_bad_layout() -> None:
    addresses = {"worker:0": "a:1", "worker:2": "c:1", "tensorboard:0": "tb:1"}
    with pytest.raises(TfConfigError, match="missing index 1"):
        build_tf_config(addresses, "tensorboard:0")


@pytest.mark.parametrize(
    ("task_id", "expected"),
    [("worker:0", ("worker", 0)), ("ps:12", ("ps", 12)), ("my:role:3", ("my:role", 3))],
)
def test_parse_task_id(task_id: str, expected: tuple[str, int]) -> None:
    assert parse_task_id(task_id) == expected
