"""The executor's phases that decide what the AM is told, each run alone against an in-memory store.

``main`` is a sequence of these; what they write (the registration's GPUs, the exit record of a
GPU lease failure, the user's port and visible GPUs) is what the AM plans with, so each is pinned
here without YARN.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import GpuLeaseError
from airflow_provider_tony.runtime.executor import (
    GPU_LEASE_EXIT_CODE,
    ContainerTask,
    Gpus,
    register,
    report_exit,
    report_gpu_failure,
    task_environment,
)
from airflow_provider_tony.runtime.messages import ClusterDocument, ExitRecord, Registration
from airflow_provider_tony.runtime.spec import JobSpec


def _task(tmp_path: Path, generation: int = 2) -> ContainerTask:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"instances": 1, "command": ["true"]}}})
    env = {C.ENV_YARN_CONTAINER_ID: "container_1", C.ENV_SKEIN_APPLICATION_ID: "application_1_0001"}
    return ContainerTask(
        app=SimpleNamespace(kv={}), spec=spec, env=env, role="worker", index=0, generation=generation, workdir=tmp_path
    )


def test_registration_names_the_runtime_pin_else_the_gpus_this_container_owns(tmp_path: Path) -> None:
    for gpus, pinned in (
        (Gpus(local=["0", "1"], pinned=["1"], owned=None, leases=None), ["1"]),
        (Gpus(local=["0", "1"], pinned=None, owned=["0"], leases=None), ["0"]),
        (Gpus(local=[], pinned=None, owned=None, leases=None), None),
    ):
        task = _task(tmp_path)
        heartbeat = register(task, "node1", 4321, gpus)
        heartbeat.stop()
        heartbeat.join(timeout=10)
        reg = Registration.from_json(task.app.kv[C.kv_register("worker:0")])
        assert (reg.host, reg.port, reg.gpus_local, reg.gpus_pinned, reg.generation) == (
            "node1",
            4321,
            gpus.local,
            pinned,
            2,
        )
        assert reg.container_id == "container_1"


def test_a_gpu_lease_failure_is_an_exit_record_of_this_gang_and_retryable(tmp_path: Path) -> None:
    task = _task(tmp_path, generation=3)
    report_gpu_failure(task, GpuLeaseError("GPU 0 taken"))
    record = ExitRecord.from_json(task.app.kv[C.kv_exit("worker:0")])
    assert (record.exit_code, record.generation) == (GPU_LEASE_EXIT_CODE, 3)
    assert GPU_LEASE_EXIT_CODE == C.TEMPFAIL_EXIT_CODE == 75 and 75 in C.RETRYABLE_EXIT_CODES
    assert record.stderr_tail == ["GPU lease: GPU 0 taken"]


def test_the_exit_record_names_the_newest_checkpoint_on_hdfs_after_the_final_flush(tmp_path: Path) -> None:
    task = _task(tmp_path, generation=3)
    report_exit(task, 1, ["peer gone"], checkpoint_step=40)
    record = ExitRecord.from_json(task.app.kv[C.kv_exit("worker:0")])
    assert (record.exit_code, record.generation, record.checkpoint_step) == (1, 3, 40)
    report_exit(task, 0, [])  # a task that uploads nothing
    assert ExitRecord.from_json(task.app.kv[C.kv_exit("worker:0")]).checkpoint_step is None


def test_the_user_environment_carries_the_port_and_hides_gpus_under_an_empty_runtime_pin(tmp_path: Path) -> None:
    task = _task(tmp_path)
    cluster = ClusterDocument(addresses={"worker:0": "node1:4321"}, num_tasks={"worker": 1})
    pinned_none = task_environment(task, cluster, 4321, Gpus(local=[], pinned=[], owned=None, leases=None))
    assert pinned_none[C.ENV_PORT] == "4321" and pinned_none[C.ENV_CUDA_VISIBLE_DEVICES] == ""
    assert pinned_none[C.ENV_TASK_ID] == "worker:0"
