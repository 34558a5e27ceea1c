"""Build the ``TF_CONFIG`` each task executor hands to TensorFlow.

TensorFlow's distribution strategies (MultiWorkerMirroredStrategy,
ParameterServerStrategy) find their peers only through the ``TF_CONFIG``
environment variable: a JSON object with the whole ``cluster`` and this
process's own ``task``. Every member must see the *same* cluster, or the
collective ops / PS connections hang rather than fail, which is the worst
possible failure mode on a shared YARN cluster. So the cluster is built here
by pure functions from the address table the application master gathers, and
tested for that property; writing the environment is a separate thin step.

Task ids are ``"role:index"`` strings (``"worker:1"``), addresses are
``"host:port"`` strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_tony.runtime.errors import TfConfigError

#: Roles that are members of the TensorFlow cluster, in the order TensorFlow
#: documents them. Only these appear in ``TF_CONFIG["cluster"]``.
TF_CLUSTER_ROLES: tuple[str, ...] = ("chief", "worker", "ps")

#: The evaluator reads checkpoints beside the cluster: it gets a ``TF_CONFIG``
#: (so ``tf.distribute`` knows its task type) but must not be listed in the
#: cluster, or the workers would wait for it to join their collectives.
EVALUATOR_ROLE = "evaluator"


def parse_task_id(task_id: str) -> tuple[str, int]:
    """Split ``"role:index"`` into ``(role, index)``.

    Strict about the form (no sign, no leading zeros) because ``"worker:01"``
    and ``"worker:1"`` would otherwise silently collide in the cluster list.
    """
    if not isinstance(task_id, str):
        raise TfConfigError(
            f"task id {task_id!r} is a {type(task_id).__name__}, not a string; "
            "use the form 'role:index', e.g. 'worker:0'"
        )
    role, sep, index_text = task_id.rpartition(":")
    if not sep or not role or not index_text.isdigit() or not index_text.isascii():
        raise TfConfigError(f"task id {task_id!r} is not of the form 'role:index'; use e.g. 'worker:0' or 'ps:1'")
    index = int(index_text)
    if str(index) != index_text:
        raise TfConfigError(
            f"task id {task_id!r} has a non-canonical index {index_text!r}; write it as '{role}:{index}'"
        )
    return role, index


def build_cluster(addresses: Mapping[str, str]) -> dict[str, list[str]]:
    """Return the TensorFlow ``cluster`` dict for ``addresses``.

    ``addresses`` maps every task id of the job (any role) to its
    ``"host:port"``. Only :data:`TF_CLUSTER_ROLES` are kept, each list ordered
    by index, because TensorFlow identifies a task by its position in the
    list: ``cluster["worker"][1]`` must be the address of ``worker:1``.

    Raises :class:`TfConfigError` when any task id is malformed or when a
    cluster role's indexes are not exactly ``0..n-1`` (a gap would shift every
    later task to the wrong position, so it is refused, naming the role and
    the missing index).
    """
    by_role: dict[str, dict[int, str]] = {}
    for task_id, address in addresses.items():
        role, index = parse_task_id(task_id)
        if role not in TF_CLUSTER_ROLES:
            continue
        # Mapping keys are unique and parse_task_id rejects non-canonical
        # indexes, so one (role, index) can never arrive twice.
        by_role.setdefault(role, {})[index] = address

    cluster: dict[str, list[str]] = {}
    for role in TF_CLUSTER_ROLES:
        slots = by_role.get(role)
        if not slots:
            continue
        count = len(slots)
        missing = [i for i in range(count) if i not in slots]
        if missing:
            present = sorted(slots)
            raise TfConfigError(
                f"role {role!r} has task indexes {present} but is missing index "
                f"{missing[0]} ('{role}:{missing[0]}'); the {count} tasks of a role "
                f"must be numbered {role}:0..{role}:{count - 1} with no gaps"
            )
        cluster[role] = [slots[i] for i in range(count)]
    return cluster


def build_tf_config(addresses: Mapping[str, str], task_id: str) -> dict[str, Any] | None:
    """Return the ``TF_CONFIG`` dict for ``task_id``, or ``None`` if it needs none.

    Cluster roles and the evaluator get ``{"cluster": ..., "task": {"type":
    role, "index": i}}``; the evaluator's cluster never lists the evaluator
    (:func:`build_cluster` keeps only cluster roles). Other roles, such as
    ``tensorboard`` or a custom ``data`` role, get ``None``: giving them a
    ``TF_CONFIG`` would make any ``tf.distribute`` code they run try to join
    the cluster.

    Raises :class:`TfConfigError` if ``task_id`` is not a key of ``addresses``
    (its TF_CONFIG would not match what the others see) or the cluster is
    invalid.
    """
    if task_id not in addresses:
        known = ", ".join(sorted(addresses)) or "none"
        raise TfConfigError(
            f"task id {task_id!r} has no address (known tasks: {known}); "
            "register the task's address before building its TF_CONFIG"
        )
    role, index = parse_task_id(task_id)
    # Build (and so validate) the cluster even for roles that get no
    # TF_CONFIG, so that every executor fails the same way on a bad layout.
    cluster = build_cluster(addresses)
    if role not in TF_CLUSTER_ROLES and role != EVALUATOR_ROLE:
        return None
    return {"cluster": cluster, "task": {"type": role, "index": index}}


def tf_config_env(addresses: Mapping[str, str], task_id: str) -> dict[str, str]:
    """Return the environment variables to add for ``task_id``.

    ``{"TF_CONFIG": <json>}`` or ``{}`` for roles outside TensorFlow. Returns
    a dict rather than writing ``os.environ`` so the caller decides where it
    goes (a subprocess ``env=``), and so it can be tested without side effects.
    """
    config = build_tf_config(addresses, task_id)
    if config is None:
        return {}
    return {"TF_CONFIG": json.dumps(config, sort_keys=True)}
