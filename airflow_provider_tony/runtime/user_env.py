"""Everything the user process sees: its environment variables and the names in its working directory.

Why a module of its own: the environment is built from pure pieces (the role's
``env``, the framework's cluster variables, the granted GPUs, TonY's own
variables) and is what the training code reads first; keeping it apart from the
executor's phases keeps it pure and testable without a container. The
executor's other helpers find the working directory's files by these names.
"""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import inputs, workspace
from airflow_provider_tony.runtime.frameworks import TORCH_RANK_ROLES, framework_env, torch_defaults
from airflow_provider_tony.runtime.gpu import gpu_env
from airflow_provider_tony.runtime.messages import ClusterDocument
from airflow_provider_tony.runtime.spec import JobSpec

# Inside the container's working directory.
PROGRESS_FILE = "progress.json"
MODEL_DIR = "model"
TENSORBOARD_DIR = "tensorboard"


def user_environment(
    spec: JobSpec,
    role: str,
    index: int,
    cluster: ClusterDocument,
    app_id: str,
    workdir: Path,
    base: dict[str, str],
    port: int | None = None,
) -> dict[str, str]:
    """Everything the user process sees, built from pure pieces."""
    task_id = f"{role}:{index}"
    env = {**base, **spec.role_env(role)}
    env.pop(C.ENV_TF_CONFIG, None)
    env.update(framework_env(spec.framework, cluster.addresses, task_id, spec.nprocs()))
    env.update(gpu_env(cluster.gpus.get(task_id, [])))
    env.update(
        {
            C.ENV_ROLE: role,
            C.ENV_TASK_INDEX: str(index),
            C.ENV_TASK_ID: task_id,
            C.ENV_APP_ID: app_id,
            C.ENV_ATTEMPT: base.get(C.ENV_ATTEMPT, "1"),
            C.ENV_CLUSTER_SPEC: json.dumps(cluster.addresses, sort_keys=True),
            C.ENV_NUM_TASKS: json.dumps(cluster.num_tasks, sort_keys=True),
            C.ENV_PROGRESS_FILE: str(workdir / PROGRESS_FILE),
            C.ENV_CHECKPOINT_DIR: str(workdir / spec.checkpoint.local_dir),
            C.ENV_MODEL_DIR: str(workdir / MODEL_DIR),
            C.ENV_TENSORBOARD_DIR: str(workdir / TENSORBOARD_DIR),
            "PYTHONUNBUFFERED": "1",
        }
    )
    # The job's own modules first; a PYTHONPATH the user set in ``env`` comes next.
    env[C.ENV_PYTHONPATH] = workspace.python_path(
        workdir, spec.src_dir is not None, spec.role_env(role).get(C.ENV_PYTHONPATH), base.get(C.ENV_PYTHONPATH)
    )
    # TonY's variables, unless the job sets one itself.
    compat = workspace.tony_env(
        role, index, cluster.addresses, len(tracked_task_ids(spec)), task_id == spec.decider_task(), app_id, port
    )
    for key, value in compat.items():
        env.setdefault(key, value)
    if spec.framework == "pytorch" and role in TORCH_RANK_ROLES:
        resources = spec.roles[role]
        for key, value in torch_defaults(spec.nproc(role), resources.vcores, resources.gpus).items():
            env.setdefault(key, value)
    return env


def local_environments(
    spec: JobSpec, role: str, index: int, cluster: ClusterDocument, env: dict[str, str]
) -> list[dict[str, str]]:
    """One environment per process of the container (``JobSpec.nproc``), from local rank 0's ``env``.

    They differ only in the framework's variables (``LOCAL_RANK``, the global ``RANK``); the
    working directory, the progress file and ``CUDA_VISIBLE_DEVICES`` are the container's, shared
    by all, so each process picks its GPU by ``LOCAL_RANK`` as under ``torchrun``.
    """
    task_id = f"{role}:{index}"
    if spec.nproc(role) == 1:
        return [env]
    return [
        {**env, **framework_env(spec.framework, cluster.addresses, task_id, spec.nprocs(), local_rank)}
        for local_rank in range(spec.nproc(role))
    ]


def tracked_task_ids(spec: JobSpec) -> list[str]:
    """The tasks whose exit counts (TonY's ``TASK_NUM`` counts these)."""
    tracked = set(spec.tracked_roles())
    return [t for t in spec.task_ids() if t.split(":")[0] in tracked]


def source_links(spec: JobSpec, workdir: Path) -> list[str]:
    """Link the unpacked source tree into the working directory; names left out (taken)."""
    if spec.src_dir is None or not (workdir / C.SRC_ALIAS).is_dir():
        return []
    reserved = {PROGRESS_FILE, MODEL_DIR, TENSORBOARD_DIR, spec.checkpoint.local_dir.split("/")[0], *spec.files}
    reserved |= {inputs.INPUTS_DIR} if spec.inputs else set()
    return workspace.link_source(workdir / C.SRC_ALIAS, workdir, reserved)
