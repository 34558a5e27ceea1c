"""The framework seam: one address table, each framework's own rendezvous variables.

Every executor derives its variables from the same table the AM hands out, so every rank must
agree on the master's address and on the world, and no two ranks may share a number: a
disagreement would hang ``init_process_group`` rather than fail it.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_tony.runtime.errors import SpecError, TfConfigError
from airflow_provider_tony.runtime.frameworks import TORCH_ENV, framework_env, torch_env, torch_ranks
from airflow_provider_tony.runtime.spec import JobSpec

TABLE = {
    "worker:1": "h2:2002",
    "chief:0": "h0:2000",
    "worker:0": "h1:2001",
    "evaluator:0": "h3:2003",
    "tensorboard:0": "h4:2004",
}


def test_rank_zero_is_the_chief_then_the_workers_by_index() -> None:
    assert torch_ranks(TABLE) == ["chief:0", "worker:0", "worker:1"]
    assert torch_ranks({"worker:1": "b:2", "worker:0": "a:1"}) == ["worker:0", "worker:1"]


def test_every_rank_agrees_on_the_master_and_the_world_and_no_rank_repeats() -> None:
    envs = {task: torch_env(TABLE, task) for task in ("chief:0", "worker:0", "worker:1")}
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"h0"}
    assert {e["MASTER_PORT"] for e in envs.values()} == {"2000"}
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"3"}
    assert [envs[t]["RANK"] for t in ("chief:0", "worker:0", "worker:1")] == ["0", "1", "2"]
    one = envs["worker:1"]
    assert one["LOCAL_RANK"] == "0" and one["LOCAL_WORLD_SIZE"] == "1" and one["GROUP_RANK"] == "2"
    # TonY's PyTorchRuntime variables, so TonY's examples run unchanged.
    assert one["INIT_METHOD"] == "tcp://h0:2000" and one["WORLD"] == "3"
    assert set(one) == set(TORCH_ENV)


def test_roles_outside_the_process_group_get_no_rendezvous() -> None:
    assert torch_env(TABLE, "evaluator:0") == {}
    assert torch_env(TABLE, "tensorboard:0") == {}


def test_a_bad_layout_fails_every_task_alike() -> None:
    """A gap in the workers would shift every later rank: refused, as TensorFlow's cluster is."""
    gap = {"worker:0": "a:1", "worker:2": "c:3", "tensorboard:0": "t:4"}
    for task in gap:
        with pytest.raises(TfConfigError, match="missing index 1"):
            torch_env(gap, task)
    with pytest.raises(TfConfigError, match="has no address"):
        torch_env(gap, "worker:1")


def test_the_seam_keeps_tensorflow_as_it_was_and_picks_by_name() -> None:
    tf = framework_env("tensorflow", TABLE, "worker:1")
    assert json.loads(tf["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert set(tf) == {"TF_CONFIG"}
    torch = framework_env("pytorch", TABLE, "worker:1")
    assert torch["RANK"] == "2" and "TF_CONFIG" not in torch
    with pytest.raises(ValueError, match="'mxnet' is not one of tensorflow, pytorch"):
        framework_env("mxnet", TABLE, "worker:1")


def _job(**extra: object) -> dict[str, object]:
    return {"roles": {"worker": {"command": ["true"], "instances": 2}}, **extra}


def test_a_job_is_tensorflow_unless_it_says_otherwise() -> None:
    assert JobSpec.from_dict(_job()).framework == "tensorflow"
    assert JobSpec.from_dict(_job(framework="pytorch")).framework == "pytorch"


@pytest.mark.parametrize(
    ("job", "field", "phrase"),
    [
        (_job(framework="mxnet"), "framework", "use one of 'tensorflow', 'pytorch'"),
        (_job(framework=3), "framework", "use 'tensorflow' or 'pytorch'"),
        (
            {"framework": "pytorch", "roles": {"worker": {"command": ["true"]}, "ps": {"command": ["true"]}}},
            "roles.ps",
            "has no parameter servers",
        ),
        (_job(framework="pytorch", env={"RANK": "3"}), "env.RANK", "remove RANK from env"),
        (
            {"framework": "pytorch", "roles": {"worker": {"command": ["true"], "env": {"MASTER_PORT": "1"}}}},
            "roles.worker.env.MASTER_PORT",
            "set by the runtime for a PyTorch job",
        ),
    ],
)
def test_bad_framework_input_is_refused_naming_the_field(job: dict[str, object], field: str, phrase: str) -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(job)
    assert err.value.field == field and phrase in str(err.value)


def test_a_tensorflow_job_may_still_set_rank_variables_of_its_own() -> None:
    """Only a PyTorch job's rendezvous is the runtime's; a TensorFlow job's scripts may use the names."""
    assert JobSpec.from_dict(_job(env={"RANK": "3"})).env == {"RANK": "3"}
