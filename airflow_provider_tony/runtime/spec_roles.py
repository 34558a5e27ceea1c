"""The roles of a job: what each kind of task runs, how many, how big, and on which nodes.

Why a module of its own: a role is the unit YARN allocates and TensorFlow wires. ``RoleSpec`` is
its program and resources (instances, memory, vcores, GPUs), ``Placement`` spreads its tasks over
nodes or pins them to hosts, ``MemoryRetry`` grows its memory for the next try after a kill, and
the skein services that run its tasks are named from it (``task_of_container``). ``JobSpec``
(``spec.py``) files the roles by name; ``validated_roles`` holds the rules across them (a chief or
a worker to decide the job, one chief, a bounded number of tasks).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime.constants import MAX_TASKS
from airflow_provider_tony.runtime.model import (
    MiB,
    Model,
    _at,
    _check,
    _env,
    _fail,
    _int,
    _named_models,
    _optional_text,
    _relative_path,
    _str_list,
    _text,
    parse_memory_mib,
    shown,
)

#: Roles in the order task ids are listed; any other role follows alphabetically.
#: Chief first so that ``task_ids()[0]`` is the task that decides success.
ROLE_ORDER: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")


# Roles TensorFlow allows only one of: TF_CONFIG names a single chief, and a
# second evaluator would just duplicate evaluation work and summaries.
_SINGLETON_ROLES = ("chief", "evaluator")
_DECIDING_ROLES = ("chief", "worker")

_ROLE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
#: Joins a role and a task index into the name of a one-task skein service
#: (``worker.2``); role names cannot contain it, so the two never collide.
PLACED_SERVICE_SEP = "."
# ``worker.elsewhere``: not a task index, so no first-gang container maps to a task through it.
FALLBACK_SERVICE_SUFFIX = "elsewhere"


@dataclass
class Placement(Model):
    """Where a role's containers may run, for roles that care (``placement`` of a role).

    Written as ``placement: spread``, as a list of hosts (``placement: [node1, node2]``),
    or as this mapping. YARN places strictly (no relaxed locality): a task waits for
    room on its node rather than landing elsewhere.
    """

    spread: bool = False
    """Put each task of the role on a different node, chosen at submit time among the running nodes (with the
    role's ``node_label``, else the unlabelled ones, or among ``nodes``); with more tasks than nodes they are
    dealt round-robin, so no node holds two before every node holds one."""
    nodes: list[str] = field(default_factory=list)
    """Only these hosts (YARN node host names, without the port)."""

    def validate(self) -> None:
        _check(
            isinstance(self.spread, bool),
            "spread",
            lambda: f"{shown(self.spread)} is not true or false; give true or false",
        )
        hosts = _str_list(self.nodes, "nodes", "['node1.example.com', 'node2.example.com']")
        for i, host in enumerate(hosts):
            _check(
                bool(_HOST.match(host)),
                f"nodes[{i}]",
                lambda: f"{shown(host)} is not a host name; give the node's host name as YARN lists it, without a port",
            )
        _check(
            len(set(hosts)) == len(hosts), "nodes", lambda: f"{shown(hosts)} lists a host twice; list each host once"
        )
        self.nodes = hosts
        _check(
            self.spread or bool(self.nodes),
            "spread",
            "placement says nothing: set spread: true, or list nodes (or remove placement)",
        )

    @classmethod
    def coerce(cls, value: object, field_: str) -> Placement | None:
        """``"spread"``, a list of hosts, a mapping, a Placement, or None."""
        if value is None or isinstance(value, Placement):
            return value
        if isinstance(value, str):
            _check(
                value == "spread",
                field_,
                lambda: (
                    f"{shown(value)} is not a placement;"
                    " write 'spread', a list of hosts, or {spread: true, nodes: [...]}"
                ),
            )
            return cls(spread=True)
        if isinstance(value, (list, tuple)):
            with _at(field_):
                return cls(nodes=list(value))
        return cls.from_dict(value, field_)


@dataclass
class RoleSpec(Model):
    """One TensorFlow task type (``worker``, ``ps``, ...): how many, how big, what to run.

    The program is exactly one of ``command`` (a full argument list, run
    without a shell so no quoting surprises), ``module`` (``python -m``) or
    ``script`` (a ``.py`` path; relative paths must be shipped with ``files``, or lie in the
    job's ``src_dir``).
    ``args`` go after ``module``/``script``.  ``memory`` accepts strings such
    as ``"4 GiB"`` and is normalised to MiB.
    """

    instances: int = 1
    """How many tasks of this role; ``chief`` and ``evaluator`` allow only 1; a job runs at most 4,096 tasks in all."""
    memory: MiB = 1024
    """Memory per container: an int of MiB or a size such as ``"4 GiB"``, ``"2g"``, ``"512 MiB"``; at most the
    cluster's ``yarn.scheduler.maximum-allocation-mb``."""
    vcores: int = 1
    """Virtual cores per container."""
    gpus: int = 0
    """GPUs per container (YARN resource ``yarn.io/gpu``); the task sees exactly these in ``CUDA_VISIBLE_DEVICES``."""
    node_label: str | None = None
    """Run only on nodes with this YARN node label."""
    placement: Placement | None = None
    """Optional: ``spread`` the tasks over distinct nodes, or pin them to a list of hosts; see Placement."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables for this role's tasks, over the job-wide ``env``; ``TF_CONFIG``, ``CUDA_VISIBLE_DEVICES``
    and ``TONY_*`` are reserved."""
    command: list[str] | None = None
    """The full argument list to run (no shell), like ``["python", "train.py"]``; exclusive with ``module`` and
    ``script``."""
    module: str | None = None
    """A Python module to run as ``python -m MODULE``; exclusive with ``command`` and ``script``."""
    script: str | None = None
    """A ``.py`` file to run: absolute (shipped from the submitting machine) or relative to the container's working
    directory (shipped with ``files``)."""
    args: list[str] = field(default_factory=list)
    """Arguments after ``module`` or ``script`` (with ``command``, put them in the list)."""

    def validate(self) -> None:
        self.instances = _int(self.instances, "instances", 1, "ask for at least 1 instance or remove the role")
        if self.instances > MAX_TASKS:
            _fail("instances", f"{self.instances} tasks asked for; a job may run at most {MAX_TASKS} tasks in all")
        self.memory = parse_memory_mib(self.memory, "memory")
        self.vcores = _int(self.vcores, "vcores", 1, "ask for at least 1 vcore")
        self.gpus = _int(self.gpus, "gpus", 0, "use 0 for CPU-only tasks")
        self.node_label = _optional_text(self.node_label, "node_label", "give a YARN node label name or null")
        self.placement = Placement.coerce(self.placement, "placement")
        self.env = _env(self.env, "env")
        self.args = _str_list(self.args, "args", "['--epochs', '3']")
        self._validate_program()

    def _validate_program(self) -> None:
        fix = "set exactly one of command, module or script"
        programs = {"command": self.command, "module": self.module, "script": self.script}
        given = [k for k, v in programs.items() if v is not None]
        _check(len(given) > 0, "command", f"no program given; {fix}")
        _check(
            len(given) == 1,
            "command",
            lambda: f"{' and '.join(f'{k} {shown(programs[k])}' for k in given)} both given; {fix}",
        )
        if isinstance(self.command, str):
            _fail(
                "command",
                f"{self.command!r} is a string; pass a list like {self.command.split()!r}"
                " (no shell is used, so a string would not be split into arguments)",
            )
        if self.command is not None:
            self.command = _str_list(self.command, "command", "['python', 'train.py']")
            _check(
                len(self.command) > 0,
                "command",
                "[] is empty; give the program and its arguments, like ['python', 'train.py']",
            )
            _check(
                not self.args, "args", lambda: f"{shown(self.args)} given with command; append them to command instead"
            )
        elif self.module is not None:
            self.module = _text(self.module, "module", "give a dotted module name like 'trainer.main'")
            _check(
                bool(_MODULE.match(self.module)),
                "module",
                lambda: f"{shown(self.module)} is not a dotted Python module name; give one like 'trainer.main'",
            )
        else:
            fix = "give a .py path relative to the container working directory (shipped with files) or absolute"
            path = _text(self.script, "script", fix)
            _check(path.endswith(".py"), "script", lambda: f"{shown(path)} is not a .py file; {fix}")
            self.script = path if path.startswith("/") else _relative_path(path, "script", "the script")

    def argv(self, python: str) -> list[str]:
        """The full argument list of one task; ``python`` comes from ``PythonEnv.python_command()``.

        ``-u`` keeps stdout unbuffered so logs reach YARN as they happen, not when the task dies.
        """
        if self.command is not None:
            return list(self.command)
        _check(
            bool(python),
            "python",
            lambda: f"{shown(python)} is not an interpreter; pass PythonEnv.python_command() or sys.executable",
        )
        target = ["-m", self.module] if self.module is not None else [str(self.script)]
        return [python, "-u", *target, *self.args]


#: The largest ``memory_retry.factor``: a request grown more per try is a guess, not a retry.
MAX_MEMORY_RETRY_FACTOR = 8.0


@dataclass
class MemoryRetry(Model):
    """Opt-in: after YARN killed a task's container for its memory, the next Airflow try asks for more.

    A container killed for memory (``out_of_memory``) fails the job without a
    retry by default: the same request would be killed again. With ``factor``
    set, the operator's next try gives the killed task's role
    ``memory * factor`` MiB (rounded up, at most ``max``) and is retried; once
    the request has reached ``max`` an out-of-memory failure is final again.
    In-application restarts (``max_restarts``) are never spent on it.
    """

    factor: float | None = None
    """Multiply the killed role's memory by this for the next Airflow try (more than 1, at most 8); null (the
    default) turns the retry off."""
    max: MiB | None = None
    """The most memory a try may ask for one task of that role (an int of MiB or a size string); required with
    ``factor``, and not below the memory of every role."""

    def validate(self) -> None:
        if self.factor is None:
            _check(self.max is None, "max", "is set without factor; give factor (like 1.5) too, or remove max")
            return
        factor = self.factor
        fix = f"give a number above 1 and at most {MAX_MEMORY_RETRY_FACTOR:g}, like 1.5 or 2"
        ok = not isinstance(factor, bool) and isinstance(factor, (int, float)) and math.isfinite(factor)
        _check(ok, "factor", lambda: f"{shown(factor)} is not a number; {fix}")
        _check(1 < factor <= MAX_MEMORY_RETRY_FACTOR, "factor", lambda: f"{shown(factor)} is out of range; {fix}")
        self.factor = float(factor)
        _check(
            self.max is not None,
            "max",
            "is missing; give the most memory a retry may ask for, like '8 GiB' (the cluster's maximum container"
            " size at most)",
        )
        assert self.max is not None
        self.max = parse_memory_mib(self.max, "max")

    @property
    def enabled(self) -> bool:
        return self.factor is not None

    def next_request(self, requested_mib: int) -> int | None:
        """What the next try asks for after ``requested_mib`` was killed: None when it cannot grow (off, or at max)."""
        if self.factor is None or self.max is None:
            return None
        grown = min(math.ceil(requested_mib * self.factor), self.max)
        return grown if grown > requested_mib else None


def validated_roles(value: Any) -> dict[str, RoleSpec]:
    """A job's ``roles``: each name and section checked, at most ``MAX_TASKS`` tasks in all, a chief or a
    worker to decide the job, and one task at most of a role TensorFlow allows only one of."""
    roles = _named_models(
        value,
        "roles",
        RoleSpec,
        example="{'worker': {...}}",
        pattern=_ROLE_NAME,
        rule="a valid role name; use 1-32 lowercase letters, digits, '_' or '-', starting with a letter",
    )
    total = sum(role.instances for role in roles.values())
    if total > MAX_TASKS:
        _fail(
            "roles",
            f"{total} tasks asked for in all; a job may run at most {MAX_TASKS} tasks (the AM's state document"
            " holds no more), ask for fewer instances",
        )
    _check(
        any(r in roles for r in _DECIDING_ROLES),
        "roles",
        lambda: (
            f"{shown(sorted(roles))} has no 'chief' or 'worker';"
            " add a 'worker' (or 'chief') role that runs your training"
        ),
    )
    for name in _SINGLETON_ROLES:
        if name in roles:
            n = roles[name].instances
            _check(
                n == 1,
                f"roles.{name}.instances",
                lambda: f"{n} {name}s requested; there can be only one {name}, use workers for more",
            )
    return roles


def task_of_container(service: str, instance: int) -> str:
    """The task id (``role:index``) a skein container runs; inverse of :meth:`JobSpec.role_services`."""
    role, sep, index = service.partition(PLACED_SERVICE_SEP)
    if sep and index.isdigit() and index.isascii():
        return f"{role}:{int(index)}"
    return f"{service}:{instance}"
