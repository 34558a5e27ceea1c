"""Job files as first-class input: ``job="x.yaml"`` in a DAG reads like ``tony submit x.yaml``.

The file is parsed as YAML first, then each string value rendered by
Airflow's Jinja environment (``TonyOperator._render_job``), its relative paths are resolved beside it by the function
the CLI uses, and every numeric JobSpec field may come from a template.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.cli import load_job
from airflow_provider_tony.operators.tony import TonyOperator
from airflow_provider_tony.runtime import spec as spec_module
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec, numbers_from_text
from tests.unit.support.job_files import FakeHook

JOB_YAML = """\
name: digits-{{ params.tag }}
roles:
  worker:
    instances: "{{ params.workers }}"
    memory: "{{ params.memory }}"
    script: train.py
    args: ["--epochs", "{{ params.epochs }}"]
heartbeat_timeout: "{{ params.timeout }}"
files:
  conf.yaml: {conf}
"""


def context(**params: Any) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="files", task_id="train", run_id="manual__1", map_index=-1, try_number=1)
    return {"ti": ti, "params": params}


def in_dag(tmp_path: Path, job: object) -> TonyOperator:
    from airflow.sdk import DAG

    dag = DAG("files", schedule=None)
    dag.fileloc = str(tmp_path / "dags" / "files.py")
    op = TonyOperator(task_id="train", job=job, dag=dag)
    op._hook = FakeHook()  # type: ignore[assignment]
    return op


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "dags" / "training"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text("print('train')\n")
    conf = tmp_path / "conf.yaml"
    conf.write_text("not: {{ a template }}\n")
    (folder / "job.yaml").write_text(JOB_YAML.replace("{conf}", str(conf)))
    return folder


def test_a_yaml_job_is_rendered_by_airflow_and_its_script_found_beside_it(tmp_path: Path, job_dir: Path) -> None:
    op = in_dag(tmp_path, "training/job.yaml")
    ctx = context(tag="nightly", workers=3, memory="1 GiB", epochs=7, timeout=40)
    op.render_template_fields(ctx)
    spec = op.build_spec(ctx)
    worker = spec.roles["worker"]
    assert spec.name == "digits-nightly"
    assert (worker.instances, worker.memory, worker.args) == (3, 1024, ["--epochs", "7"])
    assert spec.heartbeat_timeout == 40.0
    assert worker.script == str(job_dir / "train.py")
    # A .yaml string inside the job is a path to ship, not a template to load.
    assert spec.files["conf.yaml"] == str(tmp_path / "conf.yaml")


def test_the_operator_and_the_cli_resolve_a_job_file_alike(tmp_path: Path, job_dir: Path) -> None:
    plain = job_dir / "plain.yaml"
    plain.write_text("roles: {worker: {script: train.py, instances: 2}}\n")
    from_cli = load_job(str(plain))
    from_dag = in_dag(tmp_path, "training/plain.yaml").build_spec(context())
    assert from_cli.roles == from_dag.roles
    assert from_dag.roles["worker"].script == str(job_dir / "train.py")


def test_a_yaml_that_is_not_a_mapping_names_the_field_the_file_and_where(tmp_path: Path, job_dir: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    (job_dir / "list.yaml").write_text("- a\n- b\n")
    # The same words as `tony validate` (one reader, jobfile.py), under the operator's field name.
    with pytest.raises(AirflowFailException, match=r"job: training/list.yaml:1:1: holds a list, not a JobSpec mapping"):
        in_dag(tmp_path, "training/list.yaml").build_spec(context())


def _numeric_fields(cls: type, prefix: str = "") -> list[tuple[str, type]]:
    """Every int/float field of the model, as dotted paths (walks nested specs and a role)."""
    hints = typing.get_type_hints(cls)
    nested = getattr(cls, "_NESTED", {})
    out = []
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        if f.name in nested:
            out += _numeric_fields(nested[f.name], path + ".")
        elif f.name == "roles":
            out += _numeric_fields(spec_module.RoleSpec, "roles.worker.")
        else:
            hint = hints[f.name]
            if typing.get_origin(hint) is list:
                if typing.get_args(hint)[0] in (int, float):
                    out.append((path, list))
                continue
            kinds = set(typing.get_args(hint)) or {hint}
            if kinds & {int, float}:
                out.append((path, int if int in kinds else float))
    return out


def test_every_numeric_field_may_come_from_a_template() -> None:
    fields = _numeric_fields(JobSpec)
    assert len(fields) >= 15 and "checkpoint.keep" in dict(fields) and "am_vcores" in dict(fields)
    # checkpoint.keep_best ranks by the gate's metric, which needs a model to judge.
    data: dict[str, Any] = {
        "roles": {"worker": {"command": ["true"]}},
        "quality_gate": {"metric": "val_accuracy"},
        "checkpoint": {"model_dir": "/models/m"},
    }
    expected = {}
    for number, (path, kind) in enumerate(fields, start=2):
        value: Any = number * 10 if kind is int else number * 10 + 0.5
        if path == "heartbeat_interval":
            value = 1.5
        if path == "memory_retry.factor":  # at most 8
            value = 1.5
        if path == "memory_retry.max":  # not below every role's memory (1024 MiB by default)
            value = 4096
        if path == "nproc_per_node":  # a PyTorch job's, at most the worker's 1 vcore
            value = 1
            data["framework"] = "pytorch"
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        if kind is list:
            value = [number]
            node[last] = [str(number)]
        else:
            node[last] = str(value)  # what a "{{ params.x }}" renders to
        expected[path] = value
    spec = JobSpec.from_dict(numbers_from_text(data))
    as_dict = spec.to_dict()
    for path, value in expected.items():
        node: Any = as_dict
        for key in path.split("."):
            node = node[key]
        assert node == value, path


def test_text_that_is_not_a_number_is_left_for_validation() -> None:
    data = numbers_from_text({"roles": {"worker": {"instances": "two", "memory": "2 GiB", "command": ["true"]}}})
    assert data["roles"]["worker"]["instances"] == "two" and data["roles"]["worker"]["memory"] == "2 GiB"
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(data)
    assert err.value.field == "roles.worker.instances"


def test_a_missing_or_broken_job_file_fails_at_once_and_says_where(tmp_path: Path, job_dir: Path) -> None:
    """No retry can find a file that is not there: AirflowFailException, not a retried error."""
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match=r"job: 'training/nope.yaml' not found .*relative to the DAG file"):
        in_dag(tmp_path, "training/nope.yaml").render_template_fields(context())
    (job_dir / "broken.yaml").write_text("name: {{ params.tag \nroles: {}\n")
    broken = (
        r"job: training/broken.yaml:2:6: not valid YAML: .*; a value that starts with a template tag.*must be quoted"
    )
    with pytest.raises(AirflowFailException, match=broken):
        in_dag(tmp_path, "training/broken.yaml").render_template_fields(context())
    (job_dir / "bad_template.yaml").write_text("name: '{{ params.tag '\nroles: {}\n")
    with pytest.raises(AirflowFailException, match=r"job: name: '\{\{ params.tag ' is not a valid Jinja template"):
        in_dag(tmp_path, "training/bad_template.yaml").render_template_fields(context())
