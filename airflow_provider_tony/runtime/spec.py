"""The declarative job model shared by the Airflow operator and the in-container runtime.

Why one model: the operator validates a job on the Airflow worker, serialises it
(JSON or YAML) into the YARN application, and the application master and task
executors read the very same document back.  If both sides parse it with this
module, whatever was accepted at submit time means the same thing on the
cluster, and a typo is rejected in the Airflow log (seconds) instead of in a
container log (minutes later, after YARN has queued and launched things).

Style follows skein's ``objects.py``: every object validates itself on
construction, normalises friendly values (``"2 GiB"`` becomes ``2048``),
rejects unknown keys in ``from_dict`` (a misspelt ``memroy`` must not silently
fall back to a default), and ``from_dict(to_dict())`` is an exact round trip.

Every error is a :class:`SpecError` whose ``field`` is a dotted path
(``roles.worker.memory``) and whose message names the value and the fix.

The model is split by purpose: ``model.py`` (the ``Model`` base and the
value checks every section is built from), ``spec_roles.py`` (roles, their
resources and placement), ``spec_shipping.py`` (the Python, files and source a
job ships), ``spec_data.py`` (inputs, checkpoints, the quality gate, retention, early stopping)
and ``spec_access.py`` (ACLs, Kerberos). This module is ``JobSpec``, the whole
job with the rules across its sections, and the one place callers import the
model from: every public name of those modules is re-exported here.

These modules import only the standard library and PyYAML because they are shipped
into YARN containers, where neither Airflow, TensorFlow nor skein may exist.
It is the model alone: the checks only the submitting side can run (the
cluster's limits, files on the submitting machine) are in ``yarn/checks.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, get_args, get_type_hints

import yaml

from airflow_provider_tony.runtime import jobyaml
from airflow_provider_tony.runtime.constants import MAX_TASKS
from airflow_provider_tony.runtime.errors import SpecError as SpecError
from airflow_provider_tony.runtime.model import _UNITS as _UNITS
from airflow_provider_tony.runtime.model import (
    MiB,
    Model,
    _at,
    _check,
    _coerce,
    _env,
    _fail,
    _int,
    _is_int,
    _named_models,
    _number,
    _optional_seconds,
    _seconds,
    _str_list,
    _text,
    hdfs_folder,
    parse_memory_mib,
    plain,
    shown,
)
from airflow_provider_tony.runtime.namenodes import other_namenodes
from airflow_provider_tony.runtime.spec_access import Acls, KerberosSpec
from airflow_provider_tony.runtime.spec_data import _INPUT_NAME as _INPUT_NAME
from airflow_provider_tony.runtime.spec_data import (
    GATE_MODES,
    SHARDING_POLICIES,
    STOPPING_RULES,
    CheckpointSpec,
    EarlyStopping,
    InputSpec,
    QualityGate,
    RetentionSpec,
)
from airflow_provider_tony.runtime.spec_roles import (
    _DECIDING_ROLES,
    FALLBACK_SERVICE_SUFFIX,
    MAX_MEMORY_RETRY_FACTOR,
    PLACED_SERVICE_SEP,
    ROLE_ORDER,
    MemoryRetry,
    Placement,
    RoleSpec,
    task_of_container,
    validated_roles,
)
from airflow_provider_tony.runtime.spec_roles import _ROLE_NAME as _ROLE_NAME
from airflow_provider_tony.runtime.spec_shipping import (
    ARCHIVE_ALIAS,
    ARCHIVE_SUFFIXES,
    PythonEnv,
    validated_files,
    validated_src_dir,
)

# The ``name as name`` imports re-export what callers read from this module besides ``__all__``
# (scripts/gen_reference.py: _UNITS, _ROLE_NAME, _INPUT_NAME; the tests: SpecError).
__all__ = [
    "ARCHIVE_ALIAS",
    "ARCHIVE_SUFFIXES",
    "FALLBACK_SERVICE_SUFFIX",
    "ROLE_ORDER",
    "SUCCESS_POLICIES",
    "Acls",
    "CheckpointSpec",
    "EarlyStopping",
    "InputSpec",
    "GATE_MODES",
    "MiB",
    "JobSpec",
    "KerberosSpec",
    "MAX_MEMORY_RETRY_FACTOR",
    "MAX_SPEC_BYTES",
    "MAX_TASKS",
    "Model",
    "PLACED_SERVICE_SEP",
    "Placement",
    "PythonEnv",
    "MemoryRetry",
    "QualityGate",
    "RetentionSpec",
    "RoleSpec",
    "SHARDING_POLICIES",
    "STOPPING_RULES",
    "hdfs_folder",
    "numbers_from_text",
    "parse_memory_mib",
    "plain",
    "shown",
    "task_of_container",
]

#: ``chief``: the job succeeds when the deciding task (chief:0, else worker:0)
#: succeeds.  ``all_workers``: every tracked task must succeed.
SUCCESS_POLICIES: tuple[str, ...] = ("chief", "all_workers")

# ``untracked_roles``' default: names it may hold even in a job that defines no such role.
_DEFAULT_UNTRACKED = ("ps", "tensorboard")
# YARN's own limits on application tags (ApplicationSubmissionContext.checkTags).
_MAX_TAGS = 10
_MAX_TAG_LEN = 100
_MAX_NAME_LEN = 100
#: The largest JobSpec, as compact JSON. It reaches every container base64-encoded in one environment
#: variable (``TONY_JOB_SPEC``), and Linux refuses to start a process with any single argument or
#: environment string over 128 KiB (``MAX_ARG_STRLEN``: "Argument list too long"): 64 KiB of JSON is
#: 87 KiB encoded, leaving room for what the submitting side adds (staged paths, its own tags).
MAX_SPEC_BYTES = 64 * 1024


@dataclass
class JobSpec(Model):
    """A whole distributed training job: roles, Python, files, timeouts and policies.

    Nested fields accept either model objects or their dict form, so the
    operator can take plain kwargs and a YAML file can be loaded as is.
    """

    name: str = "tony"
    """The YARN application name (1-100 characters, one line)."""
    queue: str = "default"
    """The YARN queue; the operator uses the connection's default queue when the job names none."""
    tags: list[str] = field(default_factory=list)
    """YARN application tags (at most 10, ASCII, lower-cased); the operator adds its own to find a running application
    again."""
    roles: dict[str, RoleSpec] = field(default_factory=dict)
    """The task types by name (``chief``, ``worker``, ``ps``, ``evaluator``, ``tensorboard`` or any other); at least a
    ``chief`` or a ``worker``."""
    python: PythonEnv = field(default_factory=PythonEnv)
    """Which Python runs ``module`` and ``script`` roles on the nodes."""
    files: dict[str, str] = field(default_factory=dict)
    """Files to ship into every container: name in the working directory -> local absolute path or ``hdfs://`` URL."""
    src_dir: str | None = None
    """A training project shipped whole: a local directory (packed and staged on HDFS by content hash) or an
    ``hdfs://`` archive; unpacked in every container, on ``sys.path``, and ``script``/``module`` are relative to it."""
    # Every beat wakes the executor, skein's AM JVM and the AM, on the cores the
    # workers train on: 5 s (Spark's executors beat every 10 s) rather than TonY's
    # 1 s, because a beat costs training time on a busy node (CHANGELOG.md).
    # A start or an exit is sent at once, not with the next beat; only a hang is
    # found by the timeout.
    heartbeat_interval: float = 5.0
    """Seconds between a task executor's heartbeats to the AM (a start or an exit is sent at once)."""
    heartbeat_timeout: float = 25.0
    """A tracked task silent this many seconds is lost and fails the job (retryable); more than twice
    ``heartbeat_interval``."""
    registration_timeout: float = 300.0
    """Seconds for every task to register with the AM (TensorFlow needs them all at once) before the job fails. For a
    gang that replaces one YARN preempted, it runs from when the gang's last container is allocated: the job waits as
    long as its queue's capacity is taken (bounded by ``deadline``)."""
    deadline: float | None = None
    """Seconds the whole job may run; null means no limit."""
    startup_timeout: float = 600.0
    """Seconds the application may wait in YARN's queue (ACCEPTED) before the follower kills it as retryable."""
    progress_stall_timeout: float | None = None
    """Fail (retryable) a tracked task that reported progress and then reported no new step for this many seconds; null
    turns it off."""
    retryable_exit_codes: list[int] = field(default_factory=list)
    """Extra exit codes (1-255) of a tracked task that mark the job's failure retryable, as Kubeflow's exit-code restart
    policy does; 75 and 128-255 (killed by a signal: preemption, OOM) always are, any other non-zero code is the
    script's own failure and fails the Airflow task without retries."""
    max_restarts: int = 0
    """Times the AM may restart the whole gang inside the same YARN application after a retryable task failure (a
    container or node lost, a signal, missed heartbeats): fresh containers, a new TF_CONFIG, every task resuming from
    the latest complete checkpoint. 0 (the default) fails the application at once and leaves the retry to Airflow;
    once the restarts are spent the job fails as retryable. A failure of the user code itself never restarts. A
    container preempted by YARN for another queue restarts the gang even with 0 and does not count (the cluster's
    decision, not the job's fault)."""
    framework: str = "tensorflow"
    """What the tasks' processes are wired for: ``tensorflow`` (``TF_CONFIG``) or ``pytorch`` (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` as ``torchrun``
    sets them, ``nproc_per_node`` processes per container, rank 0 being ``chief:0`` or else ``worker:0``; and TonY's
    ``INIT_METHOD``, ``WORLD``), so ``init_process_group("env://")`` works."""
    nproc_per_node: int | None = None
    """``framework: pytorch`` only: processes per ``chief``/``worker`` container, as ``torchrun --nproc_per_node``
    starts them (``LOCAL_RANK`` 0..n-1, global ``RANK``s numbered container by container); null means each role's
    ``gpus``, or 1 without GPUs. At most the role's ``vcores``, and its ``gpus`` when it has GPUs. One value for the
    job: a per-role count would only matter for a chief sized apart from its workers, which the null default covers."""
    success_policy: str = "chief"
    """``chief``: the job succeeds when chief:0 (else worker:0) succeeds; ``all_workers``: every tracked task must
    succeed."""
    untracked_roles: list[str] = field(default_factory=lambda: list(_DEFAULT_UNTRACKED))
    """Roles whose exit does not decide the job; they are stopped when the tracked roles finish. Each must be a role
    of the job, or ``ps``/``tensorboard`` (the defaults) when the job does not define them."""
    acls: Acls = field(default_factory=Acls)
    """Who besides the submitter may view or kill the application."""
    am_memory: MiB = 512
    """Memory of the application master's container (skein's Java AM plus TonY's Python AM), in MiB or a size string."""
    am_vcores: int = 1
    """Virtual cores of the application master's container."""
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    """Where checkpoints and the final model go on HDFS, and how often they are uploaded."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables for every task; a role's own ``env`` wins."""
    kerberos: KerberosSpec = field(default_factory=KerberosSpec)
    """Kerberized clusters: fresh HDFS delegation tokens for jobs longer than the tokens' maximum lifetime."""
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    """Training data on HDFS by name (``a-z``, digits, ``_``): checked before submit and staged to each receiving
    task's local disk before its script starts; see InputSpec."""
    other_namenodes: list[str] = field(default_factory=list)
    """NameNodes besides the default filesystem's that the job's code reads or writes on its own (TonY's
    ``tony.other.namenodes``): ``hdfs://<nameservice>`` or ``hdfs://<host>:<port>``, at most 16. The NameNodes of the
    job's own ``hdfs://`` locations (inputs, checkpoint, model, record, files) are found without it. Each one's WebHDFS
    address comes from the Hadoop conf dir or the connection's ``namenodes`` extra; on a Kerberized cluster the job
    gets a delegation token for each, in the containers' token file."""
    quality_gate: QualityGate = field(default_factory=QualityGate)
    """Publish the model only when its evaluation metric is at least as good as the last published model's."""
    retention: RetentionSpec = field(default_factory=RetentionSpec)
    """How many of this task's earlier runs' checkpoint folders the operator keeps after a run succeeded."""
    memory_retry: MemoryRetry = field(default_factory=MemoryRetry)
    """Opt-in: after a container was killed for its memory, the next Airflow try asks for more (``factor``, capped
    at ``max``); off by default, when such a failure is not retried."""
    early_stopping: EarlyStopping = field(default_factory=EarlyStopping)
    """Opt-in, for a hyperparameter sweep's trials: stop this trial once its metric at a step is worse than the median
    of the sweep's finished trials' at that step (``rule: median``); off by default."""

    _NESTED: ClassVar[dict[str, type[Model]]] = {
        "python": PythonEnv,
        "acls": Acls,
        "checkpoint": CheckpointSpec,
        "kerberos": KerberosSpec,
        "quality_gate": QualityGate,
        "retention": RetentionSpec,
        "memory_retry": MemoryRetry,
        "early_stopping": EarlyStopping,
    }

    # -- validation --------------------------------------------------------- #
    def validate(self) -> None:
        self.name = _text(self.name, "name", "give a name of 1-100 characters on one line")
        _check(
            len(self.name) <= _MAX_NAME_LEN,
            "name",
            lambda: f"{shown(self.name)} is {len(self.name)} characters; shorten it to at most {_MAX_NAME_LEN}",
        )
        self.queue = _text(self.queue, "queue", "give a YARN queue name like 'default'")
        self.tags = self._validated_tags()
        for name, cls in self._NESTED.items():
            value = _coerce(getattr(self, name), cls, name)
            with _at(name):
                value.validate()
            setattr(self, name, value)
        self.roles = validated_roles(self.roles)
        self.files = validated_files(self.files)
        self.src_dir = validated_src_dir(self.src_dir)
        self.env = _env(self.env, "env")
        self._validate_timeouts()
        self.retryable_exit_codes = self._validated_exit_codes()
        self._validate_tracking()
        self._validate_framework()
        self._validate_nproc()
        self.inputs = self._validated_inputs()
        self.other_namenodes = other_namenodes(self.other_namenodes)
        self._validate_gate()
        self._validate_memory_retry()
        self._validate_am_apart()
        self.am_memory = parse_memory_mib(self.am_memory, "am_memory")
        self.am_vcores = _int(self.am_vcores, "am_vcores", 1, "give the application master at least 1 vcore")
        self.max_restarts = _int(
            self.max_restarts, "max_restarts", 0, "give 0 (Airflow retries) or a small count of in-application restarts"
        )
        self._check_size()

    def _check_size(self) -> None:
        """At most ``MAX_SPEC_BYTES`` of JSON, or the containers could not even start; names the largest part."""
        size = len(self.to_json(indent=None).encode())
        if size <= MAX_SPEC_BYTES:
            return
        parts = {name: plain(getattr(self, name)) for name in ("env", "files", "inputs", "tags")}
        for role, spec in self.roles.items():
            for name in ("args", "command", "env"):
                parts[f"roles.{role}.{name}"] = plain(getattr(spec, name))
        largest = max(parts, key=lambda name: len(json.dumps(parts[name])))
        _fail(
            largest,
            f"the job is {size} bytes as JSON, more than the {MAX_SPEC_BYTES} that reach a container"
            f" (one environment variable); this field is the largest ({len(json.dumps(parts[largest]))} bytes):"
            " ship long argument lists or settings in a file (files: or src_dir) and pass its name",
        )

    def _validated_inputs(self) -> dict[str, InputSpec]:
        inputs = _named_models(
            self.inputs,
            "inputs",
            InputSpec,
            example="{'clicks': {'path': '/data/clicks/dt=2026-12-01'}}",
            pattern=_INPUT_NAME,
            rule="an input name; use 1-32 lowercase letters, digits or '_', starting with a letter"
            " (it becomes part of $TONY_INPUT_<NAME>_DIR)",
        )
        for name, item in inputs.items():
            where = f"inputs.{name}"
            for i, role in enumerate(item.roles):
                _check(
                    role in self.roles,
                    f"{where}.roles[{i}]",
                    lambda: (
                        f"{shown(role)} is not a role of this job (roles: {', '.join(map(repr, self.role_names()))});"
                        " name a role from 'roles', or leave roles empty for the tracked roles"
                    ),
                )
        return inputs

    def input_tasks(self, name: str) -> list[str]:
        """The tasks that receive input ``name``, in task-id order: what ``shard`` deals its files across."""
        wanted = self.inputs[name].roles or self.tracked_roles()
        return [t for t in self.task_ids() if t.split(":")[0] in wanted]

    def _validated_tags(self) -> list[str]:
        """YARN tags: <= 10, ASCII, <= 100 chars; lowercased because YARN stores them lowercased.

        Normalising here means a tag we later search for (e.g. to find an
        already-submitted run) matches what the ResourceManager reports.
        """
        tags = _str_list(self.tags, "tags", "['team-a', 'nightly']")
        out: list[str] = []
        fix = f"give 1-{_MAX_TAG_LEN} ASCII characters without commas"
        for i, tag in enumerate(tags):
            _text(tag, f"tags[{i}]", fix)
            ok = len(tag) <= _MAX_TAG_LEN and tag.isascii() and "," not in tag
            _check(ok, f"tags[{i}]", lambda: f"{shown(tag)} is not a valid YARN tag; {fix}")
            if tag.lower() not in out:
                out.append(tag.lower())
        _check(
            len(out) <= _MAX_TAGS,
            "tags",
            lambda: f"{len(out)} tags given {shown(out)}; YARN accepts at most {_MAX_TAGS}, drop some",
        )
        return out

    def _validated_exit_codes(self) -> list[int]:
        codes = self.retryable_exit_codes
        fix = "give a list of exit codes from 1 to 255, like [1, 3]"
        _check(isinstance(codes, list), "retryable_exit_codes", lambda: f"{shown(codes)} is not a list; {fix}")
        out = []
        for i, code in enumerate(codes):
            where = f"retryable_exit_codes.{i}"
            _check(
                _is_int(code) and 1 <= code <= 255,
                where,
                lambda: f"{shown(code)} is not an exit code from 1 to 255; {fix}",
            )
            out.append(int(code))
        return sorted(set(out))

    def _validate_timeouts(self) -> None:
        for name in ("heartbeat_interval", "heartbeat_timeout", "registration_timeout", "startup_timeout"):
            setattr(self, name, _seconds(getattr(self, name), name))
        for name in ("deadline", "progress_stall_timeout"):
            setattr(self, name, _optional_seconds(getattr(self, name), name))
        # Two missed heartbeats must not kill a task: one late beat is normal under GC or load.
        _check(
            self.heartbeat_timeout > 2 * self.heartbeat_interval,
            "heartbeat_timeout",
            lambda: (
                f"{self.heartbeat_timeout} s must be > 2 x heartbeat_interval ({self.heartbeat_interval} s);"
                f" raise it above {2 * self.heartbeat_interval} s or lower heartbeat_interval"
            ),
        )

    def _validate_tracking(self) -> None:
        self.success_policy = _text(self.success_policy, "success_policy", "use 'chief' or 'all_workers'")
        _check(
            self.success_policy in SUCCESS_POLICIES,
            "success_policy",
            lambda: (
                f"{shown(self.success_policy)} is not a success policy;"
                f" use one of {', '.join(map(repr, SUCCESS_POLICIES))}"
            ),
        )
        self.untracked_roles = _str_list(self.untracked_roles, "untracked_roles", "['ps', 'tensorboard']")
        self._validate_untracked_names()
        tracked = self.tracked_roles()
        _check(
            any(r in tracked for r in _DECIDING_ROLES),
            "untracked_roles",
            lambda: (
                f"{shown(self.untracked_roles)} untracks every chief/worker role; keep 'chief' or 'worker' tracked,"
                " or nothing would decide whether the job succeeded"
            ),
        )
        decider = self.decider_task().split(":")[0]
        _check(
            self.success_policy != "chief" or decider in tracked,
            "untracked_roles",
            lambda: (
                f"{shown(self.untracked_roles)} untracks {shown(decider)}, which decides success under success_policy"
                f" 'chief'; remove {shown(decider)} from untracked_roles"
            ),
        )

    def _validate_framework(self) -> None:
        from airflow_provider_tony.runtime.frameworks import FRAMEWORKS, TORCH_ENV

        self.framework = _text(self.framework, "framework", "use 'tensorflow' or 'pytorch'")
        _check(
            self.framework in FRAMEWORKS,
            "framework",
            lambda: f"{shown(self.framework)} is not a framework here; use one of {', '.join(map(repr, FRAMEWORKS))}",
        )
        if self.framework != "pytorch":
            return
        _check(
            "ps" not in self.roles,
            "roles.ps",
            "a PyTorch job has no parameter servers (its ranks are chief and workers); remove roles.ps"
            " or set framework: tensorflow",
        )
        for where, env in (("env", self.env), *((f"roles.{n}.env", r.env) for n, r in self.roles.items())):
            taken = sorted(set(env) & set(TORCH_ENV))
            _check(
                not taken,
                f"{where}.{taken[0] if taken else ''}",
                lambda: (
                    f"is set by the runtime for a PyTorch job (the rendezvous); remove {', '.join(taken)} from {where}"
                ),
            )

    def _validate_nproc(self) -> None:
        """``nproc_per_node``: a count for a PyTorch job, no more processes than a container has cores or GPUs."""
        if self.nproc_per_node is not None:
            value = _int(self.nproc_per_node, "nproc_per_node", 1, "give 1 or more processes, or null for one per GPU")
            _check(
                self.framework == "pytorch",
                "nproc_per_node",
                lambda: (
                    f"{value} is for framework: pytorch (torchrun's processes); remove nproc_per_node"
                    " or set framework: pytorch"
                ),
            )
            self.nproc_per_node = value
        if self.framework != "pytorch":
            return
        from airflow_provider_tony.runtime.frameworks import TORCH_RANK_ROLES

        given = "nproc_per_node" if self.nproc_per_node is not None else "nproc_per_node (null: one per GPU)"
        for name in (r for r in TORCH_RANK_ROLES if r in self.roles):
            role, n = self.roles[name], self.nproc(name)
            _check(
                n <= role.vcores,
                "nproc_per_node",
                lambda: (
                    f"{given} starts {n} processes in each {name} container but roles.{name}.vcores is"
                    f" {role.vcores}; raise roles.{name}.vcores to {n} or lower nproc_per_node"
                ),
            )
            _check(
                role.gpus == 0 or n <= role.gpus,
                "nproc_per_node",
                lambda: (
                    f"{given} starts {n} processes in each {name} container but roles.{name}.gpus is"
                    f" {role.gpus} (each process takes the GPU of its LOCAL_RANK); lower nproc_per_node to at most"
                    f" {role.gpus} or raise roles.{name}.gpus"
                ),
            )

    def _validate_memory_retry(self) -> None:
        cap = self.memory_retry.max
        if cap is None or not self.roles:
            return
        smallest = min(self.roles, key=lambda name: self.roles[name].memory)
        _check(
            cap >= self.roles[smallest].memory,
            "memory_retry.max",
            lambda: (
                f"{cap} MiB is below every role's memory (the smallest is roles.{smallest}.memory,"
                f" {self.roles[smallest].memory} MiB): no retry could ask for more; raise max"
            ),
        )

    def with_memory(self, role: str, memory_mib: int) -> JobSpec:
        """This job with ``roles.<role>.memory`` set to ``memory_mib`` (the operator's memory retry), validated."""
        _check(
            role in self.roles, f"roles.{role}", lambda: f"is not a role of this job ({', '.join(self.role_names())})"
        )
        roles = dict(self.roles)
        roles[role] = dataclasses.replace(self.roles[role], memory=memory_mib)
        return dataclasses.replace(self, roles=roles)

    def _validate_am_apart(self) -> None:
        """The keytab never shares a process with the job's code: with an archive, the AM would run the
        archive's Python (its packages, any ``.pth`` file) beside the keytab ``refresh_tokens`` ships."""
        _check(
            not (self.kerberos.refresh_tokens and self.python.archive and not self.python.am_interpreter),
            "kerberos.refresh_tokens",
            "puts the connection's keytab in the AM's container, and with python.archive the AM would run the "
            "archive's Python and packages beside it; set python.am_interpreter to a Python on the nodes with "
            "skein installed (the AM then runs none of the archive), or give python.interpreter instead of the "
            "archive, or turn refresh_tokens off",
        )

    def _validate_gate(self) -> None:
        """A gate judges a published model, and best-N retention needs the metric it ranks by."""
        gate = self.quality_gate
        _check(
            not gate.enabled or self.checkpoint.model_dir is not None,
            "quality_gate.metric",
            lambda: (
                f"{shown(gate.metric)} is set but the job publishes no model;"
                " set checkpoint.model_dir, or remove the gate"
            ),
        )
        _check(
            self.checkpoint.keep_best == 0 or gate.enabled,
            "checkpoint.keep_best",
            lambda: (
                f"{self.checkpoint.keep_best} best checkpoints asked for but no metric ranks them; "
                "set quality_gate.metric (and its mode), or keep_best: 0"
            ),
        )

    def _validate_untracked_names(self) -> None:
        """Every name is a role of the job or a default: a typo (``pss``) would silently leave the
        real role (``ps``) tracked, and a job with a PS would then run until its deadline."""
        known = [*self.role_names(), *(r for r in _DEFAULT_UNTRACKED if r not in self.roles)]
        for i, name in enumerate(self.untracked_roles):
            if name in known:
                continue
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            _fail(
                f"untracked_roles[{i}]",
                f"{name!r} is not a role of this job (roles: {', '.join(map(repr, self.role_names()))});"
                f" {hint}name a role from 'roles' (or {' / '.join(map(repr, _DEFAULT_UNTRACKED))}), or remove it",
            )

    # -- convenience -------------------------------------------------------- #
    def role_names(self) -> list[str]:
        """Role names in the canonical order: chief, worker, ps, evaluator, then others A-Z."""
        rank = {name: i for i, name in enumerate(ROLE_ORDER)}
        return sorted(self.roles, key=lambda r: (rank.get(r, len(rank)), r))

    def tracked_roles(self) -> list[str]:
        """Roles whose exit counts toward success (``ps``/``tensorboard`` run forever, so not them)."""
        return [r for r in self.role_names() if r not in self.untracked_roles]

    def task_ids(self) -> list[str]:
        """Every task as ``"role:index"``, in a deterministic order both sides agree on."""
        return [f"{r}:{i}" for r in self.role_names() for i in range(self.roles[r].instances)]

    def role_services(self, role: str) -> list[str]:
        """The skein services that run ``role``'s tasks.

        One service named like the role, whose instance ``i`` is task ``i``;
        a spread role has one single-task service per task (``worker.0``,
        ``worker.1``, ...) because skein asks YARN for one node list per
        service, and spreading needs a different node for each task.
        """
        placement = self.roles[role].placement
        if placement is not None and placement.spread:
            return [f"{role}{PLACED_SERVICE_SEP}{i}" for i in range(self.roles[role].instances)]
        return [role]

    def fallback_service(self, role: str) -> str | None:
        """The spread role's service for a task whose node was lost (None for other roles).

        Declared at submit with no containers; a restarted gang asks it for a
        task whose own single-node service points at a lost node, so the task
        runs elsewhere instead of waiting for that node. It may use any node
        the role may use (its ``placement.nodes``, else its ``node_label``'s).
        """
        placement = self.roles[role].placement
        if placement is None or not placement.spread:
            return None
        return f"{role}{PLACED_SERVICE_SEP}{FALLBACK_SERVICE_SUFFIX}"

    def all_services(self, role: str) -> list[str]:
        """Every skein service of ``role``: ``role_services`` and the fallback, if any."""
        fallback = self.fallback_service(role)
        return [*self.role_services(role), *([fallback] if fallback else [])]

    def decider_task(self) -> str:
        """The task whose result decides success under the ``chief`` policy."""
        return "chief:0" if "chief" in self.roles else "worker:0"

    def nproc(self, role: str) -> int:
        """Processes each of ``role``'s containers starts: ``nproc_per_node`` (or the role's GPUs, or 1) for a
        PyTorch rank role, else 1."""
        from airflow_provider_tony.runtime.frameworks import TORCH_RANK_ROLES

        if self.framework != "pytorch" or role not in TORCH_RANK_ROLES:
            return 1
        if self.nproc_per_node is not None:
            return self.nproc_per_node
        return max(1, self.roles[role].gpus)

    def nprocs(self) -> dict[str, int]:
        """``nproc`` of every role of the job: what :func:`frameworks.torch_env` numbers the ranks from."""
        return {name: self.nproc(name) for name in self.roles}

    def role_env(self, role: str) -> dict[str, str]:
        """Job-wide ``env`` overlaid with the role's own ``env`` (the role wins)."""
        return {**self.env, **self.roles[role].env}

    # -- serialisation ------------------------------------------------------ #
    def to_json(self, indent: int | None = 2) -> str:
        """JSON is how the hook hands the spec to the application master (stdlib-only on both ends)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        """Parse and validate; a syntax error is reported as ``SpecError('spec', ...)``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            _fail("spec", f"not valid JSON ({err}); check the document's syntax")
        return cls.from_dict(data)

    @classmethod
    def from_rendered(
        cls, data: Mapping[str, Any], *, base_dir: str | None = None, defaults: Mapping[str, Any] | None = None
    ) -> JobSpec:
        """A job from its dict form as a templating engine leaves it (the operator's ``job``).

        Templates render to text, so numeric fields given as text become
        numbers (``numbers_from_text``); a relative local ``src_dir`` is read
        from ``base_dir`` (the DAG's folder, as the CLI reads it from the job
        file's); ``defaults`` fill the fields the job leaves empty (the task's
        name, the connection's queue).
        """
        out = dict(data)
        for key, value in (defaults or {}).items():
            if not out.get(key):
                out[key] = value
        src_dir = out.get("src_dir")
        if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")) and base_dir:
            out["src_dir"] = os.path.realpath(os.path.join(base_dir, src_dir))
        return cls.from_dict(numbers_from_text(out))

    def with_overrides(
        self,
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        tags: Iterable[str] = (),
        checkpoint_dir: str | None = None,
        warm_start_from: str | None = None,
    ) -> JobSpec:
        """This job with what the submitting side adds to it, validated; empty arguments change nothing.

        :param name: the YARN application name.
        :param env: variables merged over the job's ``env``.
        :param python: an interpreter path, or an environment archive (told apart by its suffix,
            ``ARCHIVE_SUFFIXES``): replaces the job's ``python``.
        :param tags: appended to the job's tags (each once).
        :param checkpoint_dir: ``checkpoint.dir``.
        :param warm_start_from: ``checkpoint.warm_start_from``.
        """
        changes: dict[str, Any] = {}
        if name:
            changes["name"] = name
        if env:
            changes["env"] = {**self.env, **env}
        if python:
            key = "archive" if python.endswith(ARCHIVE_SUFFIXES) else "interpreter"
            changes["python"] = PythonEnv.from_dict({key: python}, "python")
        if tags:
            changes["tags"] = list(dict.fromkeys([*self.tags, *tags]))
        if checkpoint_dir or warm_start_from:
            with _at("checkpoint"):
                changes["checkpoint"] = dataclasses.replace(
                    self.checkpoint,
                    dir=checkpoint_dir or self.checkpoint.dir,
                    warm_start_from=warm_start_from or self.checkpoint.warm_start_from,
                )
        return dataclasses.replace(self, **changes) if changes else self

    def to_yaml(self) -> str:
        """YAML in field order, for humans keeping job definitions next to their DAGs."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    @classmethod
    def from_yaml(cls, text: str) -> JobSpec:
        """A safe, strict load (``runtime/jobyaml.py``): no Python objects, aliases or repeated keys."""
        try:
            data = jobyaml.load(text)
        except yaml.YAMLError as err:
            _fail("spec", f"not valid YAML ({err}); check the document's syntax")
        return cls.from_dict(data)


# --------------------------------------------------------------------------- #
# Numbers that arrive as text
# --------------------------------------------------------------------------- #
def numbers_from_text(data: object, cls: type[Model] | None = None) -> object:
    """A copy of ``data`` (a spec in dict form) whose numeric fields given as text are numbers.

    Airflow renders templates to text, so ``instances: "{{ params.workers }}"``
    arrives as ``"2"``. Every ``int`` and ``float`` field of the model (nested
    objects, each role, lists of numbers) is converted here, from the model's
    own type hints, so a new numeric field is covered without a list to keep.
    Text that is not a number is left for validation to reject with the
    field's own message; a memory size like ``"2 GiB"`` stays a string.
    """
    cls = cls or JobSpec
    if not isinstance(data, Mapping):
        return data
    hints = get_type_hints(cls)
    nested: dict[str, type[Model]] = getattr(cls, "_NESTED", {})
    out = dict(data)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in out:
            continue
        value, hint = out[f.name], hints[f.name]
        if f.name in nested:
            out[f.name] = numbers_from_text(value, nested[f.name])
        elif cls is JobSpec and f.name == "roles" and isinstance(value, Mapping):
            out[f.name] = {k: numbers_from_text(v, RoleSpec) for k, v in value.items()}
        elif isinstance(value, list) and get_args(hint) and get_args(hint)[0] in (int, float):
            out[f.name] = [_number(v, get_args(hint)[0]) for v in value]
        else:
            out[f.name] = _number(value, hint)
    return out
