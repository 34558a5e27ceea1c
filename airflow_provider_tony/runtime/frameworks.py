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


def torch_layout(addresses: Mapping[str, str], nprocs: Mapping[str, int] | None = None) -> list[tuple[str, int]]:
    """``(task id, processes)`` per container in group-rank order: container ``g`` runs ``n_g`` processes.

    ``nprocs`` is per role (``JobSpec.nprocs``); a role it does not name runs one process.
    """
    counts = nprocs or {}
    layout = [(task, counts.get(task.partition(":")[0], 1)) for task in torch_ranks(addresses)]
    bad = [(task, n) for task, n in layout if n < 1]
    if bad:
        raise ValueError(f"{bad[0][0]} would run {bad[0][1]} processes; give every rank role 1 or more")
    return layout


def torch_env(
    addresses: Mapping[str, str], task_id: str, nprocs: Mapping[str, int] | None = None, local_rank: int = 0
) -> dict[str, str]:
    """``torchrun``'s variables for process ``local_rank`` of ``task_id``'s container, and TonY's own.

    Container ``g`` (group rank, :func:`torch_ranks`'s order) runs ``n_g`` processes; its
    process ``k`` is global rank ``n_0 + ... + n_(g-1) + k`` of a world of all the ``n``, as
    ``torchrun`` numbers them node by node. ``MASTER_PORT`` is rank 0's container's reserved port:
    its executor holds the port until the user processes exit (:func:`holds_port`), so the c10d
    store (global rank 0, local rank 0 of group 0) binds a port nothing else on the node has
    taken. TonY's ``PyTorchRuntime`` sets ``INIT_METHOD`` (``tcp://host:port``), ``RANK`` and
    ``WORLD``; TonY's examples read those, so they are set too, global as torch's are.
    """
    if task_id not in addresses:
        known = ", ".join(sorted(addresses)) or "none"
        raise TfConfigError(f"task id {task_id!r} has no address (known tasks: {known}); register it first")
    layout = torch_layout(addresses, nprocs)
    tasks = [task for task, _ in layout]
    if task_id not in tasks:
        return {}
    group = tasks.index(task_id)
    local = layout[group][1]
    if not 0 <= local_rank < local:
        raise ValueError(f"local rank {local_rank} of {task_id}, which runs {local} processes (0..{local - 1})")
    host, _, port = addresses[tasks[0]].rpartition(":")
    world = str(sum(n for _, n in layout))
    return {
        C.ENV_MASTER_ADDR: host,
        C.ENV_MASTER_PORT: port,
        C.ENV_RANK: str(sum(n for _, n in layout[:group]) + local_rank),
        C.ENV_WORLD_SIZE: world,
        C.ENV_LOCAL_RANK: str(local_rank),
        C.ENV_LOCAL_WORLD_SIZE: str(local),
        C.ENV_GROUP_RANK: str(group),
        C.ENV_TONY_INIT_METHOD: f"tcp://{host}:{port}",
        C.ENV_TONY_WORLD: world,
    }


def torch_defaults(nproc: int, vcores: int, gpus: int) -> dict[str, str]:
    """Variables a PyTorch task's processes start with unless the job's ``env`` sets them.

    Nothing for a single CPU process: gloo needs no help, and one process may use every core
    YARN granted.
    """
    out: dict[str, str] = {}
    if nproc > 1:
        # torch sizes its intra-op thread pool by the node's cores, not the container's vcores: n
        # processes would each start one thread per core of the node. torchrun sets 1 for n > 1;
        # the container's vcores shared among its processes is the same guard, sized by YARN's grant.
        out[C.ENV_OMP_NUM_THREADS] = str(max(1, vcores // nproc))
    if gpus > 0:
        # A collective that fails or times out (a peer lost: its container killed, its node gone)
        # aborts the NCCL communicator and ends the process, so the executor reports an exit
        # instead of the gang hanging in the collective until the job's deadline. torchrun's
        # default (torch/distributed/elastic/agent/server/local_elastic_agent.py).
        out[C.ENV_TORCH_NCCL_ASYNC_ERROR_HANDLING] = "1"
        # NCCL's own warnings say why a communicator failed (a network interface, a peer gone);
        # torch's exception alone reads "unhandled system error". On stderr they reach the
        # stderr tail the AM's diagnostics quote. WARN prints nothing while all goes well.
        out[C.ENV_NCCL_DEBUG] = "WARN"
    return out


def _tf_env(
    addresses: Mapping[str, str], task_id: str, _nprocs: Mapping[str, int] | None, _local: int
) -> dict[str, str]:
    """TensorFlow runs one process per container: ``TF_CONFIG`` alone."""
    return tf_config_env(addresses, task_id)


_ENV_BUILDERS: dict[str, Callable[[Mapping[str, str], str, Mapping[str, int] | None, int], dict[str, str]]] = {
    "tensorflow": _tf_env,
    "pytorch": torch_env,
}


def framework_env(
    framework: str,
    addresses: Mapping[str, str],
    task_id: str,
    nprocs: Mapping[str, int] | None = None,
    local_rank: int = 0,
) -> dict[str, str]:
    """The rendezvous variables ``framework`` reads, for process ``local_rank`` of ``task_id`` of the
    cluster in ``addresses`` (``nprocs``: processes per container by role, ``JobSpec.nprocs``)."""
    try:
        build = _ENV_BUILDERS[framework]
    except KeyError:
        raise ValueError(f"framework {framework!r} is not one of {', '.join(FRAMEWORKS)}") from None
    return build(addresses, task_id, nprocs, local_rank)


def holds_port(framework: str, role: str) -> bool:
    """Whether the executor keeps the task's reserved port bound while the user's server starts.

    Released before the start, the port is free while the script imports its framework
    (seconds, more under load), and any process on the node connecting out may get it as its
    source port, since it lies in the ephemeral range: TensorFlow then fails with "Could not
    start gRPC server", torch's store with ``EADDRINUSE`` (both seen with several test lanes on
    one machine). Held (bound, never listening), it is not handed out as a source port,
    and a server sharing it binds anyway: TensorFlow's gRPC server with ``SO_REUSEPORT``, torch's
    c10d store (rank 0's container hosts it on this port) with ``SO_REUSEADDR``, which Linux
    allows beside a bound socket that does not listen. Any other role (TensorBoard's guard, an
    evaluator, a custom role's server) may bind plainly: its port is released.
    """
    if framework == "pytorch":
        return role in TORCH_RANK_ROLES
    return role in TF_CLUSTER_ROLES
