"""Unit tests for the declarative job model (no cluster needed).

The round-trip tests use a value different from the default for every field,
so a field dropped or mangled by a converter cannot hide behind its default.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any, Callable

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import (
    Acls,
    CheckpointSpec,
    EarlyStopping,
    InputSpec,
    JobSpec,
    KerberosSpec,
    MemoryRetry,
    PythonEnv,
    QualityGate,
    RetentionSpec,
    RoleSpec,
    parse_memory_mib,
)

# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #
FULL: dict[str, Any] = {
    "name": "mnist-nightly",
    "queue": "gpu",
    "tags": ["team-a", "nightly"],
    "roles": {
        "chief": {
            "instances": 1,
            "memory": 4096,
            "vcores": 4,
            "gpus": 1,
            "node_label": "fast",
            "placement": None,
            "env": {"LOG_LEVEL": "debug"},
            "command": ["bash", "run.sh", "--chief"],
            "module": None,
            "script": None,
            "args": [],
        },
        "worker": {
            "instances": 3,
            "memory": 2048,
            "vcores": 2,
            "gpus": 2,
            "node_label": None,
            "placement": {"spread": True, "nodes": ["node1", "node2.example.com"]},
            "env": {},
            "command": None,
            "module": "trainer.main",
            "script": None,
            "args": ["--epochs", "3"],
        },
        "feeder": {
            "instances": 2,
            "memory": 1536,
            "vcores": 1,
            "gpus": 0,
            "node_label": None,
            "placement": None,
            "env": {},
            "command": None,
            "module": None,
            "script": "trainer/feeder.py",
            "args": [],
        },
    },
    "python": {
        "interpreter": None,
        "archive": "hdfs://nn:8020/envs/tf.tar.gz",
        "am_interpreter": "/opt/tony/bin/python",
    },
    "files": {"trainer": "/src/trainer", "data.csv": "hdfs:///data/data.csv"},
    "src_dir": "hdfs:///projects/trainer-src.tar.gz",
    "other_namenodes": ["hdfs://warehouse", "hdfs://10.0.0.9:8020"],
    "heartbeat_interval": 2.0,
    "heartbeat_timeout": 30.0,
    "registration_timeout": 120.0,
    "deadline": 7200.0,
    "startup_timeout": 900.0,
    "progress_stall_timeout": 1800.0,
    "retryable_exit_codes": [1, 3],
    "max_restarts": 2,
    "success_policy": "all_workers",
    "untracked_roles": ["feeder"],
    "framework": "pytorch",
    "nproc_per_node": 1,
    "acls": {"view_users": ["alice"], "modify_users": ["bob", "carol"]},
    "am_memory": 1024,
    "am_vcores": 2,
    "checkpoint": {
        "dir": "hdfs://nn:8020/ckpt/mnist",
        "warm_start_from": "/ckpt/previous",
        "keep": 5,
        "upload_failure_window": 300.0,
        "poll_interval": 5.0,
        "model_dir": "/models/mnist",
        "local_dir": "out/ckpt",
        "keep_best": 2,
    },
    "env": {"PYTHONHASHSEED": "0"},
    "kerberos": {"refresh_tokens": True},
    "inputs": {
        "clicks": {
            "path": "/data/clicks/dt=2026-12-01/part-*",
            "sharding": "shard",
            "roles": ["worker"],
            "retryable_if_missing": False,
            "max_bytes_per_task": 50_000_000_000,
        },
    },
    "quality_gate": {
        "metric": "val_loss",
        "mode": "min",
        "record": "/models/mnist-published.json",
        "tolerance": "1.5%",
        "approval": True,
    },
    "retention": {"max_age_days": 30.0, "keep_runs": 5},
    "memory_retry": {"factor": 1.5, "max": 8192},
    "early_stopping": {
        "rule": "median",
        "metric": "val_accuracy",
        "mode": "max",
        "sweep": "hdfs://nn:8020/sweeps/digits",
        "min_finished": 3,
        "grace_steps": 50,
    },
}

MINIMAL: dict[str, Any] = {"roles": {"worker": {"module": "trainer.main"}}}


def _defaults(cls: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _plain_defaults(cls: type) -> dict[str, Any]:
    return {k: v.to_dict() if hasattr(v, "to_dict") else v for k, v in _defaults(cls).items()}


def _spec(mutate: Callable[[dict[str, Any]], object] | None = None, base: dict[str, Any] = MINIMAL) -> JobSpec:
    data = copy.deepcopy(base)
    if mutate is not None:
        mutate(data)
    return JobSpec.from_dict(data)


# --------------------------------------------------------------------------- #
# Round trips
# --------------------------------------------------------------------------- #
def test_full_fixture_sets_every_field_to_a_non_default_value() -> None:
    """Guard the fixture itself: the round trips below only prove something if this holds."""
    for name, default in _plain_defaults(JobSpec).items():
        assert FULL[name] != default, name
    for cls, objs in (
        (CheckpointSpec, [FULL["checkpoint"]]),
        (Acls, [FULL["acls"]]),
        (KerberosSpec, [FULL["kerberos"]]),
        (InputSpec, list(FULL["inputs"].values())),
        (QualityGate, [FULL["quality_gate"]]),
        (RetentionSpec, [FULL["retention"]]),
        (MemoryRetry, [FULL["memory_retry"]]),
        (EarlyStopping, [FULL["early_stopping"]]),
        (PythonEnv, [FULL["python"], {"interpreter": "/usr/bin/python3", "archive": None}]),
        (RoleSpec, list(FULL["roles"].values())),
    ):
        for name, default in _defaults(cls).items():
            assert any(obj[name] != default for obj in objs), f"{cls.__name__}.{name}"


def test_to_dict_reproduces_normalised_input() -> None:
    assert JobSpec.from_dict(FULL).to_dict() == FULL


@pytest.mark.parametrize(
    "dump, load",
    [
        (JobSpec.to_dict, JobSpec.from_dict),
        (JobSpec.to_json, JobSpec.from_json),
        (JobSpec.to_yaml, JobSpec.from_yaml),
    ],
    ids=["dict", "json", "yaml"],
)
def test_round_trip(dump: Callable[[JobSpec], Any], load: Callable[[Any], JobSpec]) -> None:
    spec = JobSpec.from_dict(FULL)
    again = load(dump(spec))
    assert again == spec
    assert again.to_dict() == FULL


def test_round_trip_with_interpreter() -> None:
    spec = _spec(lambda d: d.update(python={"interpreter": "/opt/py/bin/python3"}))
    assert JobSpec.from_yaml(spec.to_yaml()) == spec
    assert JobSpec.from_json(spec.to_json()).python.interpreter == "/opt/py/bin/python3"


def test_to_json_is_plain_json() -> None:
    spec = JobSpec.from_dict(FULL)
    assert json.loads(spec.to_json()) == spec.to_dict()


def test_nested_objects_and_dicts_are_interchangeable() -> None:
    # Annotations give the normalised types consumers read; the constructors
    # also accept the friendly forms at runtime, which is what this checks.
    by_objects = JobSpec(
        roles={"worker": RoleSpec(instances=2, memory="2 GiB", module="trainer.main")},
        python=PythonEnv(interpreter="/usr/bin/python3"),
        acls=Acls(view_users=["alice"]),
        checkpoint=CheckpointSpec(dir="/ckpt"),
    )
    by_dicts = JobSpec(
        roles={"worker": {"instances": 2, "memory": 2048, "module": "trainer.main"}},
        python={"interpreter": "/usr/bin/python3"},
        acls={"view_users": ["alice"]},
        checkpoint={"dir": "/ckpt"},
    )
    assert by_objects == by_dicts


def test_friendly_values_are_normalised() -> None:
    spec = _spec(
        lambda d: d.update(
            tags=["Team-A", "team-a", "Nightly"],
            am_memory="1 GiB",
            heartbeat_interval=1,
            files={"./pkg/../train.py": "/src/train.py"},
            roles={"worker": {"script": "./train.py", "args": ("--lr", 0.1, 3), "memory": "1.5g", "env": {"N": 4}}},
        )
    )
    worker = spec.roles["worker"]
    assert spec.tags == ["team-a", "nightly"]  # YARN lowercases tags itself
    assert spec.am_memory == 1024
    assert isinstance(spec.heartbeat_interval, float)
    assert spec.files == {"train.py": "/src/train.py"}
    assert worker.script == "train.py"
    assert worker.args == ["--lr", "0.1", "3"]
    assert worker.memory == 1536
    assert worker.env == {"N": "4"}


def test_defaults() -> None:
    spec = _spec()
    assert (spec.name, spec.queue, spec.success_policy) == ("tony", "default", "chief")
    assert spec.untracked_roles == ["ps", "tensorboard"]
    assert spec.roles["worker"] == RoleSpec(module="trainer.main")
    assert spec.roles["worker"].memory == 1024
    assert spec.am_memory == 512
    assert spec.python == PythonEnv()
    assert spec.checkpoint == CheckpointSpec()


# --------------------------------------------------------------------------- #
# Invalid specs
# --------------------------------------------------------------------------- #
def _role(**kw: Any) -> dict[str, Any]:
    return {"module": "trainer.main", **kw}


def _set_role(name: str, **kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["roles"].__setitem__(name, _role(**kw))


INVALID: list[tuple[str, Callable[[dict[str, Any]], object], str, str]] = [
    # id, mutation, expected field, text the message must contain (the offending value)
    ("no-chief-or-worker", lambda d: d.update(roles={"ps": _role()}), "roles", "'ps'"),
    ("two-chiefs", _set_role("chief", instances=2), "roles.chief.instances", "2 chiefs"),
    ("two-evaluators", _set_role("evaluator", instances=2), "roles.evaluator.instances", "2 evaluators"),
    ("memory-zero", _set_role("worker", memory=0), "roles.worker.memory", "0 MiB"),
    ("memory-bad-string", _set_role("worker", memory="lots"), "roles.worker.memory", "'lots'"),
    ("vcores-negative", _set_role("worker", vcores=-1), "roles.worker.vcores", "-1"),
    ("instances-zero", _set_role("worker", instances=0), "roles.worker.instances", "0"),
    ("instances-bool", _set_role("worker", instances=True), "roles.worker.instances", "True"),
    ("gpus-negative", _set_role("worker", gpus=-2), "roles.worker.gpus", "-2"),
    ("unknown-top-key", lambda d: d.update(memroy=1), "memroy", "'memroy'"),
    ("unknown-role-key", _set_role("worker", memroy=1), "roles.worker.memroy", "'memroy'"),
    ("unknown-checkpoint-key", lambda d: d.update(checkpoint={"dirr": "/x"}), "checkpoint.dirr", "'dirr'"),
    ("role-not-mapping", lambda d: d["roles"].update(worker="train.py"), "roles.worker", "'train.py'"),
    ("python-not-mapping", lambda d: d.update(python="/usr/bin/python3"), "python", "'/usr/bin/python3'"),
    (
        "command-string",
        lambda d: d["roles"].update(worker={"command": "python train.py"}),
        "roles.worker.command",
        "'python train.py' is a string; pass a list",
    ),
    ("command-empty", lambda d: d["roles"].update(worker={"command": []}), "roles.worker.command", "[]"),
    ("no-program", lambda d: d["roles"].update(worker={}), "roles.worker.command", "no program"),
    ("two-programs", _set_role("worker", script="t.py"), "roles.worker.command", "'t.py'"),
    (
        "args-with-command",
        lambda d: d["roles"].update(worker={"command": ["x"], "args": ["-v"]}),
        "roles.worker.args",
        "['-v']",
    ),
    ("args-string", _set_role("worker", args="--epochs 3"), "roles.worker.args", "'--epochs 3'"),
    ("bad-module", _set_role("worker", module="trainer-main"), "roles.worker.module", "'trainer-main'"),
    ("script-not-py", lambda d: d["roles"].update(worker={"script": "t.sh"}), "roles.worker.script", "'t.sh'"),
    ("script-escapes", lambda d: d["roles"].update(worker={"script": "../t.py"}), "roles.worker.script", "'../t.py'"),
    (
        "interpreter-and-archive",
        lambda d: d.update(python={"interpreter": "/usr/bin/python3", "archive": "/envs/e.tar.gz"}),
        "python.archive",
        "'/usr/bin/python3'",
    ),
    ("interpreter-relative", lambda d: d.update(python={"interpreter": "python3"}), "python.interpreter", "'python3'"),
    ("archive-suffix", lambda d: d.update(python={"archive": "/envs/e.rar"}), "python.archive", "'/envs/e.rar'"),
    ("archive-relative", lambda d: d.update(python={"archive": "e.tar.gz"}), "python.archive", "'e.tar.gz'"),
    ("bad-role-name", lambda d: d["roles"].update(Worker=_role()), "roles.Worker", "'Worker'"),
    ("reserved-role-env", _set_role("worker", env={"TF_CONFIG": "{}"}), "roles.worker.env.TF_CONFIG", "'TF_CONFIG'"),
    ("reserved-job-env", lambda d: d.update(env={"TONY_ROLE": "x"}), "env.TONY_ROLE", "'TONY_ROLE'"),
    ("reserved-cuda-env", lambda d: d.update(env={"CUDA_VISIBLE_DEVICES": "0"}), "env.CUDA_VISIBLE_DEVICES", "CUDA"),
    ("bad-env-key", lambda d: d.update(env={"1X": "a"}), "env.1X", "'1X'"),
    ("env-value-bool", lambda d: d.update(env={"DEBUG": True}), "env.DEBUG", "True"),
    (
        "heartbeat-timeout-too-short",
        lambda d: d.update(heartbeat_interval=1.0, heartbeat_timeout=2.0),
        "heartbeat_timeout",
        "2.0 s",
    ),
    ("bad-success-policy", lambda d: d.update(success_policy="majority"), "success_policy", "'majority'"),
    ("input-bad-name", lambda d: d.update(inputs={"Clicks": {"path": "/d"}}), "inputs.Clicks", "'Clicks'"),
    ("input-no-path", lambda d: d.update(inputs={"clicks": {}}), "inputs.clicks.path", "'' is not"),
    ("input-relative", lambda d: d.update(inputs={"clicks": {"path": "d/x"}}), "inputs.clicks.path", "'d/x'"),
    (
        "input-bad-sharding",
        lambda d: d.update(inputs={"clicks": {"path": "/d", "sharding": "split"}}),
        "inputs.clicks.sharding",
        "'split'",
    ),
    (
        "input-unknown-role",
        lambda d: d.update(inputs={"clicks": {"path": "/d", "roles": ["wroker"]}}),
        "inputs.clicks.roles[0]",
        "'wroker'",
    ),
    (
        "input-retryable-text",
        lambda d: d.update(inputs={"clicks": {"path": "/d", "retryable_if_missing": "no"}}),
        "inputs.clicks.retryable_if_missing",
        "'no'",
    ),
    ("inputs-not-mapping", lambda d: d.update(inputs=["/d"]), "inputs", "['/d']"),
    ("timeout-zero", lambda d: d.update(startup_timeout=0), "startup_timeout", "0 seconds"),
    ("deadline-negative", lambda d: d.update(deadline=-5), "deadline", "-5"),
    ("timeout-string", lambda d: d.update(registration_timeout="5m"), "registration_timeout", "'5m'"),
    ("timeout-nan", lambda d: d.update(progress_stall_timeout=math.nan), "progress_stall_timeout", "nan"),
    ("untrack-only-worker", lambda d: d.update(untracked_roles=["worker"]), "untracked_roles", "['worker']"),
    (
        "untrack-deciding-chief",
        lambda d: d["roles"].update(chief=_role()) or d.update(untracked_roles=["chief"]),
        "untracked_roles",
        "'chief'",
    ),
    (
        "untrack-typo-of-ps",
        lambda d: d["roles"].update(ps=_role()) or d.update(untracked_roles=["pss"]),
        "untracked_roles[0]",
        "'pss' is not a role of this job (roles: 'worker', 'ps'); did you mean 'ps'?",
    ),
    (
        "untrack-undefined-role",
        lambda d: d.update(untracked_roles=["ps", "sidecar"]),
        "untracked_roles[1]",
        "'sidecar' is not a role of this job (roles: 'worker'); name a role from 'roles'",
    ),
    ("name-empty", lambda d: d.update(name=""), "name", "''"),
    ("name-too-long", lambda d: d.update(name="x" * 101), "name", "101 characters"),
    ("name-control-char", lambda d: d.update(name="a\nb"), "name", "'a\\nb'"),
    ("tag-comma", lambda d: d.update(tags=["a,b"]), "tags[0]", "'a,b'"),
    ("tag-non-ascii", lambda d: d.update(tags=["café"]), "tags[0]", "'café'"),
    ("too-many-tags", lambda d: d.update(tags=[f"t{i}" for i in range(11)]), "tags", "11 tags"),
    ("tags-string", lambda d: d.update(tags="nightly"), "tags", "'nightly'"),
    ("acl-user-comma", lambda d: d.update(acls={"view_users": ["a,b"]}), "acls.view_users[0]", "'a,b'"),
    ("am-memory-zero", lambda d: d.update(am_memory="0g"), "am_memory", "'0g'"),
    ("am-vcores-zero", lambda d: d.update(am_vcores=0), "am_vcores", "0"),
    ("files-dest-escapes", lambda d: d.update(files={"../x": "/x"}), "files.../x", "'../x'"),
    ("files-dest-absolute", lambda d: d.update(files={"/x": "/x"}), "files./x", "'/x'"),
    ("files-src-relative", lambda d: d.update(files={"x": "x.py"}), "files.x", "'x.py'"),
    ("checkpoint-dir-relative", lambda d: d.update(checkpoint={"dir": "ckpt"}), "checkpoint.dir", "'ckpt'"),
    (
        "checkpoint-bare-hdfs",
        lambda d: d.update(checkpoint={"model_dir": "hdfs://"}),
        "checkpoint.model_dir",
        "'hdfs://'",
    ),
    ("checkpoint-keep-zero", lambda d: d.update(checkpoint={"keep": 0}), "checkpoint.keep", "0"),
    ("checkpoint-poll-zero", lambda d: d.update(checkpoint={"poll_interval": 0}), "checkpoint.poll_interval", "0"),
    (
        "checkpoint-local-escapes",
        lambda d: d.update(checkpoint={"local_dir": "../ckpt"}),
        "checkpoint.local_dir",
        "'../ckpt'",
    ),
    (
        "checkpoint-local-absolute",
        lambda d: d.update(checkpoint={"local_dir": "/tmp"}),
        "checkpoint.local_dir",
        "'/tmp'",
    ),
]


@pytest.mark.parametrize("mutate, field, text", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_spec(mutate: Callable[[dict[str, Any]], object], field: str, text: str) -> None:
    with pytest.raises(SpecError) as info:
        _spec(mutate)
    assert info.value.field == field
    assert text in str(info.value)
    assert str(info.value).startswith(f"{field}: ")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("load, text", [(JobSpec.from_json, "{"), (JobSpec.from_yaml, "roles: [")])
def test_unparseable_document(load: Callable[[str], JobSpec], text: str) -> None:
    with pytest.raises(SpecError) as info:
        load(text)
    assert info.value.field == "spec"


@pytest.mark.parametrize("text", ["", "- worker"])
def test_document_not_a_mapping(text: str) -> None:
    with pytest.raises(SpecError) as info:
        JobSpec.from_yaml(text)
    assert info.value.field == "spec"
    assert "not a mapping" in str(info.value)


def test_revalidate_after_mutation_reports_full_path() -> None:
    spec = _spec()
    spec.roles["worker"].memory = 0
    with pytest.raises(SpecError) as info:
        spec.validate()
    assert info.value.field == "roles.worker.memory"


def test_standalone_object_reports_relative_field() -> None:
    with pytest.raises(SpecError) as info:
        RoleSpec(memory=0, module="m")
    assert info.value.field == "memory"


def test_untracked_roles_may_name_absent_default_roles() -> None:
    # The default ['ps', 'tensorboard'] must hold for a job that defines neither.
    spec = _spec(lambda d: d.update(untracked_roles=["ps", "tensorboard"]))
    assert spec.tracked_roles() == ["worker"]


def test_untracked_roles_may_name_a_custom_role_of_the_job() -> None:
    spec = _spec(lambda d: d["roles"].update(sidecar=_role()) or d.update(untracked_roles=["sidecar"]))
    assert spec.tracked_roles() == ["worker"]


def test_chief_may_be_untracked_under_all_workers_policy() -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["roles"]["chief"] = _role()
        d.update(untracked_roles=["chief"], success_policy="all_workers")

    spec = _spec(mutate)
    assert spec.tracked_roles() == ["worker"]


# --------------------------------------------------------------------------- #
# Units
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "value, mib",
    [
        (1024, 1024),
        ("1024", 1024),
        ("512 MiB", 512),
        ("512mib", 512),
        ("1 GiB", 1024),
        ("1.5 GiB", 1536),
        ("2g", 2048),
        ("2G", 2048),
        ("2048m", 2048),
        (" 3 gib ", 3072),
        ("1 GB", math.ceil(10**9 / 2**20)),  # 954: decimal gigabyte, rounded up
        ("1 MB", 1),  # 0.95 MiB rounds up
        ("1536 KiB", 2),
        ("1048576 B", 1),
        ("1 b", 1),
        ("1T", 2**20),
        (".5g", 512),
    ],
)
def test_parse_memory_mib(value: int | str, mib: int) -> None:
    assert parse_memory_mib(value, "x.memory") == mib


@pytest.mark.parametrize("value", [0, -5, "0", "0 GiB", "", "abc", "2 XB", "-1g", "1e3", "1.2.3g", 1.5, True, None])
def test_parse_memory_mib_rejects(value: Any) -> None:
    with pytest.raises(SpecError) as info:
        parse_memory_mib(value, "x.memory")
    assert info.value.field == "x.memory"
    assert (repr(value) if isinstance(value, str) else str(value)) in str(info.value)


# --------------------------------------------------------------------------- #
# Commands
# --------------------------------------------------------------------------- #
def test_argv_command_is_used_as_is() -> None:
    role = RoleSpec(command=["bash", "run.sh", 3])
    assert role.argv("/usr/bin/python3") == ["bash", "run.sh", "3"]
    assert role.argv("") == ["bash", "run.sh", "3"]


def test_argv_module() -> None:
    role = RoleSpec(module="trainer.main", args=["--epochs", 3])
    assert role.argv("/py") == ["/py", "-u", "-m", "trainer.main", "--epochs", "3"]


def test_argv_script() -> None:
    role = RoleSpec(script="trainer/train.py", args=["-v"])
    assert role.argv("./environment/bin/python") == ["./environment/bin/python", "-u", "trainer/train.py", "-v"]


def test_argv_needs_a_python_for_module_and_script() -> None:
    with pytest.raises(SpecError) as info:
        RoleSpec(module="m").argv("")
    assert info.value.field == "python"


@pytest.mark.parametrize(
    "env, command",
    [
        (PythonEnv(interpreter="/usr/bin/python3"), "/usr/bin/python3"),
        (PythonEnv(archive="/envs/tf.tgz"), "./environment/bin/python"),
        (PythonEnv(archive="hdfs:///envs/tf.zip"), "./environment/bin/python"),
        (PythonEnv(), ""),
    ],
)
def test_python_command(env: PythonEnv, command: str) -> None:
    assert env.python_command() == command


# --------------------------------------------------------------------------- #
# Convenience methods
# --------------------------------------------------------------------------- #
def test_task_ids_tracked_roles_and_decider() -> None:
    roles = {
        "tensorboard": _role(),
        "ps": _role(instances=2),
        "alpha": _role(),
        "worker": _role(instances=2),
        "evaluator": _role(),
        "chief": _role(),
    }
    spec = _spec(lambda d: d.update(roles=roles))
    assert spec.task_ids() == [
        "chief:0",
        "worker:0",
        "worker:1",
        "ps:0",
        "ps:1",
        "evaluator:0",
        "alpha:0",
        "tensorboard:0",
    ]
    assert spec.tracked_roles() == ["chief", "worker", "evaluator", "alpha"]
    assert spec.decider_task() == "chief:0"
    assert _spec().decider_task() == "worker:0"


def test_role_env_overlays_job_env() -> None:
    spec = _spec(lambda d: d.update(env={"A": "job", "B": "job"}) or d["roles"]["worker"].update(env={"B": "role"}))
    assert spec.role_env("worker") == {"A": "job", "B": "role"}


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [
        ([0], "retryable_exit_codes.0", "0 is not an exit code from 1 to 255"),
        ([1, 256], "retryable_exit_codes.1", "256"),
        ([True], "retryable_exit_codes.0", "True"),
        ("3", "retryable_exit_codes", "not a list"),
    ],
)
def test_retryable_exit_codes_are_checked(value: Any, field: str, fragment: str) -> None:
    data = {"roles": {"worker": {"command": ["true"]}}, "retryable_exit_codes": value}
    with pytest.raises(SpecError) as info:
        JobSpec.from_dict(data)
    assert info.value.field == field and fragment in str(info.value) and "like [1, 3]" in str(info.value)


def test_with_overrides_adds_what_the_submitting_side_knows_and_validates_it() -> None:
    base = JobSpec.from_dict(
        {
            "name": "job",
            "tags": ["team-a"],
            "env": {"A": "job", "B": "job"},
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"dir": "/ckpt/job", "keep": 7},
        }
    )
    assert base.with_overrides() is base, "nothing to add: the same spec, not a copy"
    spec = base.with_overrides(
        name="dag.task",
        env={"B": "task", "C": "task"},
        python="/opt/py/bin/python",
        tags=["tony", "team-a", "tony-try:2"],
        checkpoint_dir="/ckpt/run",
        warm_start_from="/ckpt/yesterday",
    )
    assert (spec.name, spec.env, spec.tags) == (
        "dag.task",
        {"A": "job", "B": "task", "C": "task"},
        ["team-a", "tony", "tony-try:2"],
    )
    assert (spec.python.interpreter, spec.python.archive) == ("/opt/py/bin/python", None)
    assert (spec.checkpoint.dir, spec.checkpoint.warm_start_from, spec.checkpoint.keep) == (
        "/ckpt/run",
        "/ckpt/yesterday",
        7,
    )
    assert base.tags == ["team-a"] and base.checkpoint.dir == "/ckpt/job", "the original is left as it was"
    for archive in ("hdfs:///envs/train.tar.gz", "/envs/train.tgz", "/envs/train.zip"):
        assert base.with_overrides(python=archive).python.archive == archive
    with pytest.raises(SpecError) as err:
        base.with_overrides(python="bin/python")
    assert err.value.field == "python.interpreter"
    with pytest.raises(SpecError) as err:
        base.with_overrides(checkpoint_dir="relative/dir")
    assert err.value.field.startswith("checkpoint.dir"), err.value
    with pytest.raises(SpecError) as err:
        base.with_overrides(tags=[f"t{i}" for i in range(20)])
    assert err.value.field.startswith("tags"), err.value


def test_from_rendered_turns_text_into_numbers_reads_src_dir_beside_the_dag_and_fills_defaults(tmp_path) -> None:
    data = {"name": "", "src_dir": "project", "roles": {"worker": {"instances": "3", "command": ["true"]}}}
    spec = JobSpec.from_rendered(data, base_dir=str(tmp_path), defaults={"name": "dag.task", "queue": "q"})
    assert (spec.name, spec.queue, spec.roles["worker"].instances) == ("dag.task", "q", 3)
    assert spec.src_dir == str((tmp_path / "project").resolve())
    kept = JobSpec.from_rendered({**data, "name": "mine", "src_dir": "hdfs:///p.tar.gz"}, base_dir=str(tmp_path))
    assert (kept.name, kept.src_dir) == ("mine", "hdfs:///p.tar.gz")


def test_two_programs_are_named_with_their_values_capped() -> None:
    """The message quotes both programs, each capped: a 3,000-argument command is not written out whole."""
    with pytest.raises(
        SpecError, match=r"^roles\.worker\.command: command \['python', 'x\.py'\] and script 'x\.py' both"
    ):
        JobSpec.from_dict({"roles": {"worker": {"command": ["python", "x.py"], "script": "x.py"}}})
    with pytest.raises(SpecError) as caught:
        JobSpec.from_dict({"roles": {"worker": {"command": ["python", *["a" * 100] * 3000], "script": "x.py"}}})
    assert len(str(caught.value)) < 1000, len(str(caught.value))


@pytest.mark.parametrize(
    ("stopping", "field", "words"),
    [
        ({"rule": "median", "sweep": "/s"}, "early_stopping.metric", "is missing"),
        ({"rule": "median", "metric": "loss"}, "early_stopping.sweep", "is missing"),
        ({"rule": "mean", "metric": "loss", "sweep": "/s"}, "early_stopping.rule", "'mean' is not a rule"),
        ({"metric": "loss", "sweep": "/s"}, "early_stopping.rule", "give rule: median"),
        ({"rule": "median", "metric": "loss", "sweep": "s"}, "early_stopping.sweep", "absolute path"),
        ({"rule": "median", "metric": "loss", "sweep": "/s", "mode": "low"}, "early_stopping.mode", "not a mode"),
        ({"rule": "median", "metric": "loss", "sweep": "/s", "min_finished": 0}, "early_stopping.min_finished", ">= 1"),
        ({"rule": "median", "metric": "loss", "sweep": "/s", "grace_steps": -1}, "early_stopping.grace_steps", ">= 0"),
        ({"rule": "median", "metric": "loss", "sweep": "/s", "every": 3}, "early_stopping", "every"),
    ],
)
def test_early_stopping_errors_name_the_field_and_the_fix(stopping: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        _spec(lambda d: d.update(early_stopping=stopping))
    assert info.value.field.startswith(field) and words in str(info.value)


def test_early_stopping_is_off_by_default_and_on_with_a_rule() -> None:
    assert not _spec().early_stopping.enabled
    on = _spec(lambda d: d.update(early_stopping={"rule": "median", "metric": "loss", "sweep": "/s"}))
    assert on.early_stopping.enabled and on.early_stopping.mode == "min" and on.early_stopping.min_finished == 1
