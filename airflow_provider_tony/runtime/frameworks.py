"""Each framework's own view of the one rendezvous: the environment a task's process starts with.

The AM gathers one address table (``"role:index" -> "host:port"``, every port reserved by its
executor) and hands it to every executor; a framework turns it into what its library reads.
TensorFlow reads ``TF_CONFIG`` (:mod:`tf_config`); PyTorch's ``init_process_group("env://")``
reads ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` as ``torchrun`` sets them. Both
are pure functions of the table, so every member derives the same cluster, and a bad layout
fails every executor the same way before any user code runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import TfConfigError
from airflow_provider_tony.runtime.tf_config import TF_CLUSTER_ROLES, build_cluster, tf_config_env

#: The frameworks a job may name (``framework:``); the first is the default.
FRAMEWORKS: tuple[str, ...] = ("tensorflow", "pytorch")

#: Roles that are ranks of a PyTorch process group, rank 0 first: ``chief:0`` when the job has
#: a chief (it then hosts the store, as TensorFlow's chief does), then the workers by index.
#: Other roles (an evaluator, tensorboard, a custom one) get no rendezvous variables.
TORCH_RANK_ROLES: tuple[str, ...] = ("chief", "worker")

#: What the runtime sets for a PyTorch task; a job's ``env`` may not set them (spec.py).
TORCH_ENV: tuple[str, ...] = (
    C.ENV_MASTER_ADDR,
    C.ENV_MASTER_PORT,
    C.ENV_RANK,
    C.ENV_WORLD_SIZE,
    C.ENV_LOCAL_RANK,
    C.ENV_LOCAL_WORLD_SIZE,
    C.ENV_GROUP_RANK,
    C.ENV_TONY_INIT_METHOD,
    C.ENV_TONY_WORLD,
)


def torch_ranks(addresses: Mapping[str, str]) -> list[str]:
    """The task ids of the process group in rank order (validated as TensorFlow's cluster is)."""
    cluster = build_cluster(addresses)  # refuses malformed ids and gaps in a role's indexes
    return [f"{role}:{i}" for role in TORCH_RANK_ROLES for i in range(len(cluster.get(role, [])))]


def torch_env(addresses: Mapping[str, str], task_id: str) -> dict[str, str]:
    """``torchrun``'s variables for ``task_id``, one process per container, and TonY's own.

    ``MASTER_PORT`` is rank 0's reserved port: its executor holds the port until the user
    process starts, so the c10d store binds a port nothing else on the node has taken.
    TonY's ``PyTorchRuntime`` sets ``INIT_METHOD`` (``tcp://host:port``), ``RANK`` and
    ``WORLD``; TonY's examples read those, so they are set too.
    """
    if task_id not in addresses:
        known = ", ".join(sorted(addresses)) or "none"
        raise TfConfigError(f"task id {task_id!r} has no address (known tasks: {known}); register it first")
    ranks = torch_ranks(addresses)
    if task_id not in ranks:
        return {}
    rank = ranks.index(task_id)
    host, _, port = addresses[ranks[0]].rpartition(":")
    world = str(len(ranks))
    return {
        C.ENV_MASTER_ADDR: host,
        C.ENV_MASTER_PORT: port,
        C.ENV_RANK: str(rank),
        C.ENV_WORLD_SIZE: world,
        C.ENV_LOCAL_RANK: "0",
        C.ENV_LOCAL_WORLD_SIZE: "1",
        C.ENV_GROUP_RANK: str(rank),
        C.ENV_TONY_INIT_METHOD: f"tcp://{host}:{port}",
        C.ENV_TONY_WORLD: world,
    }


_ENV_BUILDERS: dict[str, Callable[[Mapping[str, str], str], dict[str, str]]] = {
    "tensorflow": tf_config_env,
    "pytorch": torch_env,
}


def framework_env(framework: str, addresses: Mapping[str, str], task_id: str) -> dict[str, str]:
    """The rendezvous variables ``framework`` reads, for ``task_id`` of the cluster in ``addresses``."""
    try:
        build = _ENV_BUILDERS[framework]
    except KeyError:
        raise ValueError(f"framework {framework!r} is not one of {', '.join(FRAMEWORKS)}") from None
    return build(addresses, task_id)


def holds_port(framework: str, role: str) -> bool:
    """Whether the executor keeps the task's reserved port bound while the user's server starts.

    Released before the start, the port is free while the script imports its framework
    (seconds, more under load), and any process on the node connecting out may get it as its
    source port: TensorFlow then fails with "Could not start gRPC server" (seen in CI with three
    test lanes on one node). TensorFlow's gRPC server binds with ``SO_REUSEPORT``, so it can share
    the reservation; torch's c10d store and TensorBoard do not, so their ports are released.
    """
    return framework == "tensorflow" and role in TF_CLUSTER_ROLES
