"""The JobSpec reference and JSON Schema in docs/ are current, complete, and agree with the model."""

from __future__ import annotations

import dataclasses
import json
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from airflow_provider_tony.runtime import spec as model
from tests._util import load_script
from tests.unit.support.paths import REPO


def _load_generator() -> ModuleType:
    return load_script("scripts/gen_reference.py", "gen_reference")


gen = _load_generator()
SCHEMA = json.loads((REPO / "docs" / "jobspec.schema.json").read_text())


def test_checked_in_files_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert gen.main(["--check"]) == 0, capsys.readouterr().err


def test_every_field_of_every_spec_class_is_in_the_reference() -> None:
    text = (REPO / "docs" / "jobspec.md").read_text()
    classes = gen.spec_classes()
    assert {c.__name__ for c in classes} >= {"JobSpec", "RoleSpec", "PythonEnv", "CheckpointSpec", "Acls"}
    for cls in classes:
        assert f"## {cls.__name__}" in text
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in text, f"{cls.__name__}.{f.name} missing from docs/jobspec.md"


def test_a_new_field_is_picked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass
    class Extended(model.JobSpec):
        retryable_exit_codes: list[int] = dataclasses.field(default_factory=lambda: [75])
        """Exit codes after which a retry may help."""

    monkeypatch.setattr(gen.model, "JobSpec", Extended)
    assert "| `retryable_exit_codes` | list of integer | `[75]` | Exit codes after which a retry may help. |" in (
        gen.markdown()
    )
    assert gen.schema()["properties"]["retryable_exit_codes"]["items"] == {"type": "integer"}


def test_an_undocumented_field_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass
    class Undocumented(model.JobSpec):
        undocumented_knob: str | None = None

    monkeypatch.setattr(gen.model, "JobSpec", Undocumented)
    with pytest.raises(SystemExit, match=r"Undocumented\.undocumented_knob has no docstring"):
        gen.markdown()


def _non_default_job() -> dict[str, Any]:
    """Every field set to something other than its default, as the model normalises it."""
    return model.JobSpec.from_dict(
        {
            "name": "full",
            "queue": "training",
            "tags": ["a"],
            "files": {"train.py": "/opt/train.py"},
            "roles": {
                "chief": {"memory": "2 GiB", "script": "train.py", "args": ["-v"], "env": {"A": "1"}},
                "worker": {"instances": 2, "vcores": 2, "gpus": 1, "node_label": "gpu", "module": "trainer.main"},
                "ps": {"command": ["python", "-m", "ps"]},
            },
            "python": {"archive": "hdfs:///envs/train.tar.gz"},
            "heartbeat_interval": 2,
            "heartbeat_timeout": 10,
            "registration_timeout": 60,
            "deadline": 3600,
            "startup_timeout": 60,
            "progress_stall_timeout": 120,
            "success_policy": "all_workers",
            "untracked_roles": ["ps"],
            "acls": {"view_users": ["bob"], "modify_users": ["alice"]},
            "am_memory": "1g",
            "am_vcores": 2,
            "env": {"B": "2"},
            "checkpoint": {
                "dir": "/ckpt",
                "warm_start_from": "/old",
                "keep": 5,
                "upload_failure_window": 60,
                "poll_interval": 5,
                "model_dir": "/model",
                "local_dir": "ck",
            },
        }
    ).to_dict()


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(yaml.safe_load((REPO / "dags" / "training" / "digits_mwms.yaml").read_text()), id="example"),
        pytest.param(_non_default_job(), id="every-field"),
        pytest.param({"roles": {"worker": {"memory": "1.5 GiB", "script": "/t.py"}}, "am_memory": "512m"}, id="sizes"),
    ],
)
def test_valid_jobs_match_the_schema(document: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(document)


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"roles": {"worker": {"memroy": "1g", "script": "/t.py"}}}, "memroy"),
        ({"roles": {"worker": {"memory": "lots", "script": "/t.py"}}}, "lots"),
        ({"roles": {"worker": {"script": "/t.py", "module": "m"}}}, "oneOf"),
        ({"roles": {"Worker!": {"script": "/t.py"}}}, "Worker!"),
        ({"roles": {"worker": {"script": "/t.py"}}, "success_policy": "any"}, "any"),
        ({"name": "no roles"}, "roles"),
    ],
)
def test_invalid_jobs_fail_the_schema(document: dict[str, Any], complaint: str) -> None:
    with pytest.raises(jsonschema.ValidationError) as err:
        jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert complaint in str(err.value)
    with pytest.raises(model.SpecError):  # the model, the authority, refuses them too
        model.JobSpec.from_dict(document)
