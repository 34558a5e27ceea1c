"""Decide which GPUs each task executor may use.

YARN schedules GPUs as a count (``yarn.io/gpu``) but, unless the NodeManager
runs containers with the NVIDIA docker runtime, it does not tell a container
*which* GPUs are its own: every container on a node sees every GPU, and
TensorFlow by default grabs memory on all of them. Two workers on one 4-GPU
node would then fight over GPU 0 and OOM. So:

* with the NVIDIA runtime, YARN pins devices through
  ``NVIDIA_VISIBLE_DEVICES`` and those must be honoured
  (:func:`parse_visible_devices`);
* without it, each executor reports what it found (:func:`discover_local_gpus`)
  and the application master hands out disjoint sets per node
  (:func:`assign_gpus`), which executors apply as ``CUDA_VISIBLE_DEVICES``
  (:func:`gpu_env`).

Everything here is pure except :func:`discover_local_gpus`, whose process
runner is injectable for tests.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_tony.runtime.errors import GpuAssignmentError

#: ``NVIDIA_VISIBLE_DEVICES`` values meaning "no GPU for this container".
_NO_DEVICES = frozenset({"none", "void", ""})
#: ``NVIDIA_VISIBLE_DEVICES`` value meaning "not restricted", i.e. we cannot
#: tell which GPUs are ours and must fall back to assigning them ourselves.
_ALL_DEVICES = "all"

NVIDIA_SMI_ARGS: tuple[str, ...] = ("--query-gpu=index", "--format=csv,noheader")
#: nvidia-smi can hang on a wedged driver; an executor must not hang with it.
NVIDIA_SMI_TIMEOUT_S = 30.0


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Interpret an ``NVIDIA_VISIBLE_DEVICES`` value.

    Returns ``None`` when unset or ``"all"`` (the container is not restricted,
    so which GPUs are ours is unknown), ``[]`` for ``"none"``, ``"void"`` or
    empty (no GPUs), otherwise the listed indices or UUIDs, stripped, empty
    items dropped and duplicates removed keeping first-seen order.
    """
    if value is None:
        return None
    stripped = value.strip()
    if stripped.lower() == _ALL_DEVICES:
        return None
    if stripped.lower() in _NO_DEVICES:
        return []
    devices: list[str] = []
    for item in stripped.split(","):
        device = item.strip()
        if device and device not in devices:
            devices.append(device)
    return devices


def _task_sort_key(task_id: str) -> tuple[str, int, str]:
    """Order ``"worker:10"`` after ``"worker:2"`` so assignment is stable.

    Ids that are not ``role:index`` still sort, deterministically, by text.
    """
    role, sep, index = task_id.rpartition(":")
    if sep and index.isdigit() and index.isascii():
        return (role, int(index), "")
    return (task_id, -1, task_id)


def _device_sort_key(device: str) -> tuple[int, int, str]:
    """Lowest numeric index first, then non-numeric ids (UUIDs) by text."""
    if device.isdigit() and device.isascii():
        return (0, int(device), "")
    return (1, 0, device)


def _describe(requests: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{task_id} wants {wanted}" for task_id, wanted in requests)


def assign_gpus(
    requests: Sequence[tuple[str, str, int]],
    node_gpus: Mapping[str, Sequence[str]],
    fixed: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[str]]:
    """Give each task a set of GPUs, disjoint among tasks on the same host.

    ``requests`` are ``(task_id, host, gpus_wanted)``; ``node_gpus`` maps a
    host to the GPU ids found on it; ``fixed`` maps a task id to the devices
    YARN already pinned for it (from ``NVIDIA_VISIBLE_DEVICES``). Fixed tasks
    keep exactly their pinned devices, and those devices are withheld from
    the others on that host. The rest are served in task-id order (numeric
    index order, so ``worker:2`` before ``worker:10``), lowest GPU ids first,
    so every run of the same layout yields the same answer. A task wanting 0
    GPUs gets ``[]``.

    Raises :class:`GpuAssignmentError` for a negative or duplicate request,
    a fixed task with no request (its host is unknown, so its devices could
    not be withheld), two fixed tasks on one host sharing a device, or a host
    with fewer free GPUs than its tasks want in total.
    """
    fixed = fixed or {}
    hosts: dict[str, list[tuple[str, int]]] = {}
    seen: set[str] = set()
    for task_id, host, wanted in requests:
        if task_id in seen:
            raise GpuAssignmentError(f"task {task_id!r} is requested twice; list each task once")
        seen.add(task_id)
        if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 0:
            raise GpuAssignmentError(
                f"task {task_id!r} on host {host!r} wants {wanted!r} GPUs; the GPU count must be an integer >= 0"
            )
        hosts.setdefault(host, []).append((task_id, wanted))

    unknown_fixed = sorted(set(fixed) - seen, key=_task_sort_key)
    if unknown_fixed:
        raise GpuAssignmentError(
            f"fixed GPU assignments for {unknown_fixed} have no matching request; "
            "include every pinned task in the requests so its host is known"
        )

    result: dict[str, list[str]] = {}
    for host in sorted(hosts):
        tasks = sorted(hosts[host], key=lambda item: _task_sort_key(item[0]))
        owner: dict[str, str] = {}
        for task_id, _ in tasks:
            if task_id not in fixed:
                continue
            for device in fixed[task_id]:
                if device in owner and owner[device] != task_id:
                    raise GpuAssignmentError(
                        f"on host {host!r}, YARN pinned GPU {device!r} to both "
                        f"{owner[device]!r} and {task_id!r}; check the NodeManager's "
                        "GPU isolation (NVIDIA_VISIBLE_DEVICES must not overlap)"
                    )
                owner[device] = task_id

        free = sorted(
            (d for d in dict.fromkeys(node_gpus.get(host, ())) if d not in owner),
            key=_device_sort_key,
        )
        open_tasks = [(t, w) for t, w in tasks if t not in fixed]
        total = sum(w for _, w in open_tasks)
        if total > len(free):
            raise GpuAssignmentError(
                f"host {host!r} has {len(free)} free GPU(s) {free} but its tasks "
                f"want {total} ({_describe(open_tasks)}); lower the GPUs per task, "
                "or request more nodes with YARN GPU resources so fewer tasks share one"
            )

        position = 0
        for task_id, wanted in tasks:
            if task_id in fixed:
                result[task_id] = list(dict.fromkeys(fixed[task_id]))
            else:
                result[task_id] = free[position : position + wanted]
                position += wanted
    return {task_id: result[task_id] for task_id, _, _ in requests}


def cuda_visible_devices(devices: Sequence[str]) -> str:
    """Return the ``CUDA_VISIBLE_DEVICES`` value for ``devices``.

    An empty list gives ``""``, which CUDA reads as "no GPU": a ps task with
    ``gpus=0`` then never allocates memory on a GPU a worker needs, whereas
    leaving the variable unset would expose every GPU on the node.
    """
    return ",".join(devices)


def discover_local_gpus(
    run: Callable[..., Any] = subprocess.run,
) -> list[str]:
    """List the GPU indices ``nvidia-smi`` reports in this container.

    Returns ``[]`` when ``nvidia-smi`` is absent, fails, times out or prints
    nothing usable: a CPU-only node is normal, and GPU discovery must never
    be the reason an executor crashes. ``run`` is injectable so tests need
    neither a GPU nor the binary.
    """
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        # Bytes, decoded here leniently: text=True would raise UnicodeDecodeError on a stray byte.
        completed = run([binary, *NVIDIA_SMI_ARGS], capture_output=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if completed.returncode != 0:
        return []
    stdout = completed.stdout
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    devices: list[str] = []
    for line in stdout.splitlines():
        index = line.strip()
        if index.isdigit() and index.isascii() and index not in devices:
            devices.append(index)
    return devices


def gpu_env(devices: Sequence[str]) -> dict[str, str]:
    """Return the environment variables that confine a task to ``devices``.

    Only ``CUDA_VISIBLE_DEVICES``: ``NVIDIA_VISIBLE_DEVICES`` is read by the
    container runtime at container start, so setting it inside a running
    container would change nothing. Returned, not written to ``os.environ``,
    so the caller passes it to the training subprocess.

    Note: under the NVIDIA runtime the container sees only its pinned GPUs,
    renumbered from 0, so pass the indices :func:`discover_local_gpus` reports
    there (or the UUIDs, which CUDA also accepts), not host-side indices.
    """
    return {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(devices)}
