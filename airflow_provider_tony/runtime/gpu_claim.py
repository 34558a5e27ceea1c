"""This container's GPUs on its node: whose choice stands, and the exit when they stayed taken.

Why a module of its own: a task must own its GPUs before it registers (the AM
withholds a container's own GPUs from the job's other tasks), and where the
ownership comes from differs by cluster: the NVIDIA runtime's pinning, YARN's
GPU isolation, else node-local leases (:mod:`~airflow_provider_tony.runtime.gpu_lease`).
A claim that fails ends the task with a retryable exit record of its gang.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import GpuLeaseError
from airflow_provider_tony.runtime.gpu_lease import GpuLeases, lease_dir, yarn_assigned_gpus
from airflow_provider_tony.runtime.messages import ExitRecord
from airflow_provider_tony.runtime.spec import JobSpec

log = logging.getLogger("tony.executor")


#: Exit code reported when the node's GPUs stayed taken: EX_TEMPFAIL, retryable,
#: because GPUs on a node free up as other jobs end.
GPU_LEASE_EXIT_CODE = C.TEMPFAIL_EXIT_CODE


def gpu_lease_exit(exc: GpuLeaseError, generation: int, now: float | None = None) -> ExitRecord:
    """The exit record of a task whose GPUs stayed taken.

    It carries the gang's ``generation`` like every exit record: the AM drops
    records of other gangs, so without it a restarted gang's lease failure
    would be ignored and the job would end in a registration timeout instead.
    """
    return ExitRecord(
        exit_code=GPU_LEASE_EXIT_CODE,
        stderr_tail=[f"GPU lease: {exc}"],
        time=time.time() if now is None else now,
        generation=generation,
    )


def take_gpus(
    spec: JobSpec,
    role: str,
    task_id: str,
    env: dict[str, str],
    host: str,
    local_gpus: list[str],
    pinned: list[str] | None,
    app_id: str,
) -> tuple[GpuLeases | None, list[str] | None]:
    """This container's own GPUs on the node, so that no other application uses them.

    Under the NVIDIA runtime (``pinned``) YARN's choice stands. Else the
    NodeManager's REST view, when it assigned devices to this container
    (LinuxContainerExecutor with GPU isolation). Else node-local leases
    (:mod:`~airflow_provider_tony.runtime.gpu_lease`), held for the
    container's life. Returns the leases (to keep) and the devices owned, or
    ``(None, None)`` when the AM may divide the node's GPUs itself (a role
    without GPUs, or pinned by the runtime).
    """
    wanted = spec.roles[role].gpus
    if wanted == 0 or pinned is not None:
        return None, None
    container_id = env.get(C.ENV_YARN_CONTAINER_ID)
    nm_http = f"{host}:{env[C.ENV_NM_HTTP_PORT]}" if env.get(C.ENV_NM_HTTP_PORT) else None
    assigned = yarn_assigned_gpus(nm_http, container_id)
    if assigned is not None:
        log.info("%s: YARN assigned GPUs %s to this container", task_id, assigned)
        return None, assigned
    leases = GpuLeases(
        lease_dir({**spec.role_env(role), **env}, host), owner=f"{container_id or '?'} ({app_id} {task_id})"
    )
    # Bounded below the registration timeout, so the job fails with this
    # message rather than with the AM's generic "never registered".
    got = leases.acquire(
        local_gpus,
        wanted,
        timeout=0.75 * spec.registration_timeout,
        on_wait=lambda msg: log.warning("%s: %s", task_id, msg),
    )
    log.info("%s leased GPUs %s in %s", task_id, got, leases.directory)
    return leases, got


@dataclasses.dataclass
class Gpus:
    """What this container found and owns of the node's GPUs (see :func:`take_gpus`)."""

    local: list[str]
    pinned: list[str] | None  # by the NVIDIA runtime: the container sees only these
    owned: list[str] | None  # YARN's assignment or our leases
    leases: GpuLeases | None
