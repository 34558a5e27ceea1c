"""The framework seam: one address table, each framework's own rendezvous variables.

Every executor derives its variables from the same table the AM hands out, so every rank must
agree on the master's address and on the world, and no two ranks may share a number: a
disagreement would hang ``init_process_group`` rather than fail it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.errors import SpecError, TfConfigError
from airflow_provider_tony.runtime.frameworks import (
    TORCH_ENV,
    framework_env,
    torch_defaults,
    torch_env,
    torch_layout,
    torch_ranks,
)
from airflow_provider_tony.runtime.messages import ClusterDocument
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.user_env import local_environments, user_environment

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


# --------------------------------------------------------------------------- #
# Several processes per container (nproc_per_node): torchrun's numbering
# --------------------------------------------------------------------------- #
def _every_process(table: dict[str, str], nprocs: dict[str, int]) -> dict[tuple[str, int], dict[str, str]]:
    """Every process's variables, by (container, local rank)."""
    return {(task, k): torch_env(table, task, nprocs, k) for task, n in torch_layout(table, nprocs) for k in range(n)}


@pytest.mark.parametrize(
    "nprocs",
    [{"chief": 2, "worker": 2}, {"chief": 1, "worker": 3}, {"chief": 4, "worker": 1}, {"worker": 2}],
)
def test_every_process_of_every_container_gets_its_own_global_rank_and_all_agree_on_the_rest(
    nprocs: dict[str, int],
) -> None:
    envs = _every_process(TABLE, nprocs)
    world = sum(nprocs.get(t.split(":")[0], 1) for t in ("chief:0", "worker:0", "worker:1"))
    assert len(envs) == world
    assert sorted(int(e["RANK"]) for e in envs.values()) == list(range(world)), "each rank once, none skipped"
    assert {(e["WORLD_SIZE"], e["WORLD"], e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs.values()} == {
        (str(world), str(world), "h0", "2000")
    }
    for (task, k), env in envs.items():
        group = ["chief:0", "worker:0", "worker:1"].index(task)
        assert env["LOCAL_RANK"] == str(k) and env["GROUP_RANK"] == str(group)
        assert env["LOCAL_WORLD_SIZE"] == str(nprocs.get(task.split(":")[0], 1))
    # torchrun numbers node by node: a container's processes hold consecutive ranks, in local-rank order.
    assert envs[("chief:0", 0)]["RANK"] == "0"
    for task in ("chief:0", "worker:0", "worker:1"):
        ranks = [int(env["RANK"]) for (t, _), env in sorted(envs.items()) if t == task]
        assert ranks == list(range(ranks[0], ranks[0] + len(ranks)))


def test_heterogeneous_containers_offset_the_ranks_by_the_processes_before_them() -> None:
    """chief:0 runs 1, each worker 3: worker:0 holds 1..3 and worker:1 holds 4..6 of 7."""
    nprocs = {"chief": 1, "worker": 3}
    assert torch_layout(TABLE, nprocs) == [("chief:0", 1), ("worker:0", 3), ("worker:1", 3)]
    assert [torch_env(TABLE, "worker:1", nprocs, k)["RANK"] for k in range(3)] == ["4", "5", "6"]
    assert torch_env(TABLE, "worker:0", nprocs, 2)["RANK"] == "3"
    assert torch_env(TABLE, "worker:0", nprocs, 2)["WORLD_SIZE"] == "7"
    assert framework_env("pytorch", TABLE, "worker:1", nprocs, 1)["RANK"] == "5"
    assert torch_env(TABLE, "evaluator:0", nprocs) == {}


def test_a_local_rank_outside_the_container_or_a_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="local rank 2 of worker:0, which runs 2 processes"):
        torch_env(TABLE, "worker:0", {"worker": 2}, 2)
    with pytest.raises(ValueError, match="worker:0 would run 0 processes"):
        torch_layout(TABLE, {"worker": 0})


def test_nccl_and_thread_defaults_only_where_they_help() -> None:
    """NCCL's only with GPUs; the thread cap only with several processes sharing the vcores."""
    assert torch_defaults(1, 4, 0) == {}, "one CPU process: nothing to add"
    assert torch_defaults(2, 4, 0) == {"OMP_NUM_THREADS": "2"}
    assert torch_defaults(3, 4, 0) == {"OMP_NUM_THREADS": "1"}
    assert torch_defaults(1, 8, 1) == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_DEBUG": "WARN"}
    assert torch_defaults(4, 8, 4)["OMP_NUM_THREADS"] == "2"


def _torch(roles: dict[str, dict[str, object]], **extra: object) -> dict[str, object]:
    return {"framework": "pytorch", "roles": {n: {"command": ["true"], **r} for n, r in roles.items()}, **extra}


def test_the_default_is_one_process_per_gpu_else_one_and_only_rank_roles_run_several() -> None:
    spec = JobSpec.from_dict(
        _torch(
            {
                "chief": {"gpus": 2, "vcores": 2},
                "worker": {"instances": 2},
                "evaluator": {"gpus": 4, "vcores": 1},
            }
        )
    )
    assert spec.nproc_per_node is None
    assert spec.nprocs() == {"chief": 2, "worker": 1, "evaluator": 1}
    given = JobSpec.from_dict(_torch({"worker": {"vcores": 4, "gpus": 4}}, nproc_per_node=3))
    assert given.nproc("worker") == 3
    tf = JobSpec.from_dict({"roles": {"worker": {"command": ["true"], "gpus": 2, "vcores": 2}}})
    assert tf.nproc("worker") == 1, "TensorFlow runs one process per container"
    assert JobSpec.from_dict(given.to_dict()).nproc_per_node == 3


@pytest.mark.parametrize(
    ("job", "phrases"),
    [
        (_job(nproc_per_node=2), ["2 is for framework: pytorch", "remove nproc_per_node or set framework: pytorch"]),
        (_torch({"worker": {}}, nproc_per_node=0), ["0 must be >= 1", "null for one per GPU"]),
        (_torch({"worker": {}}, nproc_per_node="2"), ["'2' is not an integer"]),
        (
            _torch({"worker": {"vcores": 2}}, nproc_per_node=3),
            ["starts 3 processes in each worker container", "roles.worker.vcores is 2", "raise roles.worker.vcores"],
        ),
        (
            _torch({"chief": {"vcores": 4, "gpus": 2}, "worker": {"vcores": 4, "gpus": 4}}, nproc_per_node=4),
            ["each chief container", "roles.chief.gpus is 2", "lower nproc_per_node to at most 2"],
        ),
        (
            _torch({"worker": {"gpus": 4}}),
            ["nproc_per_node (null: one per GPU) starts 4 processes", "roles.worker.vcores is 1", "to 4"],
        ),
    ],
)
def test_a_bad_nproc_per_node_is_refused_before_submit_naming_the_role_and_the_fix(
    job: dict[str, object], phrases: list[str]
) -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(job)
    assert err.value.field == "nproc_per_node"
    for phrase in phrases:
        assert phrase in str(err.value), (phrase, str(err.value))


def test_each_process_gets_its_own_rank_over_the_containers_environment() -> None:
    """``local_environments``: the container's variables for all, LOCAL_RANK and RANK each its own."""
    spec = JobSpec.from_dict(_torch({"worker": {"instances": 2, "vcores": 2}}, nproc_per_node=2))
    cluster = ClusterDocument(addresses={"worker:0": "a:1", "worker:1": "b:2"}, num_tasks={"worker": 2})
    base = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "TONY_PROGRESS_FILE": "/w/progress.json",
        **torch_env(cluster.addresses, "worker:1", spec.nprocs()),
    }
    envs = local_environments(spec, "worker", 1, cluster, base)
    assert [(e["LOCAL_RANK"], e["RANK"], e["WORLD_SIZE"]) for e in envs] == [("0", "2", "4"), ("1", "3", "4")]
    assert {(e["CUDA_VISIBLE_DEVICES"], e["TONY_PROGRESS_FILE"]) for e in envs} == {("0,1", "/w/progress.json")}
    one = JobSpec.from_dict(_job())
    assert local_environments(one, "worker", 0, cluster, base) == [base]


def test_the_defaults_reach_a_pytorch_rank_and_yield_to_the_jobs_own_env(tmp_path: Path) -> None:
    cluster = ClusterDocument(addresses={"worker:0": "a:1", "evaluator:0": "e:3"}, num_tasks={"worker": 1})
    roles = {"worker": {"vcores": 4, "gpus": 2}, "evaluator": {"gpus": 1}}
    spec = JobSpec.from_dict(_torch(roles, env={"NCCL_DEBUG": "INFO"}))
    env = user_environment(spec, "worker", 0, cluster, "app_1", tmp_path, {})
    assert (env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], env["OMP_NUM_THREADS"]) == ("1", "2")
    assert env["NCCL_DEBUG"] == "INFO", "the job's own value wins"
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in user_environment(spec, "evaluator", 0, cluster, "a", tmp_path, {})
    cpu = JobSpec.from_dict(_torch({"worker": {"vcores": 2}}, nproc_per_node=2))
    cpu_env = user_environment(cpu, "worker", 0, cluster, "app_1", tmp_path, {})
    assert cpu_env["OMP_NUM_THREADS"] == "1" and "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in cpu_env
