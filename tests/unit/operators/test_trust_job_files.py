"""Hostile job files and params: a template changes values, never the job's shape; bad input ends fast.

Issue 35, points 3, 4 and 10. A DAG param (the trigger form's user) may be
anyone; a job file may come from anyone who can open a pull request. Each test
states what the job looks like after the hostile input, and which field the
refusal names. Speed figures are in bench/ (``bench/hostile_job_files.py``),
not asserted here.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_tony import cli
from airflow_provider_tony.operators.tony import TonyOperator, safe_component
from airflow_provider_tony.runtime import jobyaml
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import MAX_SPEC_BYTES, MAX_TASKS, JobSpec
from tests.unit.support.job_files import FakeHook

#: The review's 199-character param: YAML that, pasted into the file's text, added keys.
HOSTILE = (
    "x\"]\nqueue: production\nfiles: {skein.py: 'hdfs:///user/mallory/skein.py'}\n"
    "python: {archive: 'hdfs:///user/mallory/env.tar.gz'}\nkerberos: {refresh_tokens: true}\n"
    "env: {PYTHONPATH: /tmp}\n#"
)

JOB = """\
name: echo
roles:
  worker:
    instances: "{{ params.workers }}"
    script: train.py
    args: ["--label", "{{ params.label }}"]
checkpoint:
  model_dir: "/user/airflow/tony/models/{{ params.day }}"
"""


def _context(run_id: str = "manual__1", **params: Any) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="files", task_id="train", run_id=run_id, map_index=-1, try_number=1)
    return {"ti": ti, "params": params}


def _operator(tmp_path: Path, job: object, **dag_args: Any) -> TonyOperator:
    from airflow.sdk import DAG

    dag = DAG("files", schedule=None, **dag_args)
    dag.fileloc = str(tmp_path / "files.py")
    op = TonyOperator(task_id="train", job=job, dag=dag)
    op._hook = FakeHook()  # type: ignore[assignment]
    return op


def _job_file(tmp_path: Path, text: str) -> str:
    (tmp_path / "train.py").write_text("print('train')\n")
    (tmp_path / "job.yaml").write_text(text)
    return "job.yaml"


# --------------------------------------------------------------------------- point 3
def test_a_param_carrying_yaml_stays_one_argument_and_adds_no_key(tmp_path: Path) -> None:
    """Rendered after parsing: the hostile text is the value of the args it was put in, nothing else."""
    op = _operator(tmp_path, _job_file(tmp_path, JOB))
    ctx = _context(workers="2", label=HOSTILE, day="2026-12-01")
    op.render_template_fields(ctx)
    spec = op.build_spec(ctx)
    assert spec.roles["worker"].args == ["--label", HOSTILE]
    assert spec.roles["worker"].instances == 2  # text spelling a number, converted by the JobSpec
    assert spec.queue == "default" and spec.files == {} and spec.python.archive is None
    assert spec.kerberos.refresh_tokens is False and spec.env == {}


def test_a_dict_job_renders_values_only_even_as_native_objects(tmp_path: Path) -> None:
    job = {"roles": {"worker": {"script": "/opt/train.py", "args": ["{{ params.label }}"]}}}
    op = _operator(tmp_path, job)
    ctx = _context(label=HOSTILE)
    op.render_template_fields(ctx)
    assert op.build_spec(ctx).roles["worker"].args == [HOSTILE]
    native = _operator(tmp_path, {"roles": {"worker": {"script": "/opt/t.py", "args": "{{ params.extra }}"}}})
    native.dag.render_template_as_native_obj = True  # type: ignore[union-attr]
    with pytest.raises(AirflowFailException, match=r"job: roles.worker.args: .* rendered to a list"):
        native.render_template_fields(_context(extra=["--a", "--b"]))


def test_a_repeated_key_is_refused_with_the_key_and_both_lines(tmp_path: Path) -> None:
    text = "name: a\nroles: {worker: {command: ['true']}}\nqueue: default\nqueue: production\n"
    (tmp_path / "dup.yaml").write_text(text)
    with pytest.raises(cli.JobFileError, match=r"dup.yaml:4:1: .*key 'queue' appears twice \(first on line 3\)"):
        cli.load_job(str(tmp_path / "dup.yaml"))
    with pytest.raises(AirflowFailException, match=r"key 'queue' appears twice"):
        _operator(tmp_path, "dup.yaml").render_template_fields(_context())
    with pytest.raises(SpecError, match=r"key 'queue' appears twice"):
        JobSpec.from_yaml(text)


def test_keys_are_never_rendered(tmp_path: Path) -> None:
    op = _operator(tmp_path, _job_file(tmp_path, "roles:\n  worker: {command: ['true']}\n'{{ params.k }}': x\n"))
    ctx = _context(k="queue")
    op.render_template_fields(ctx)
    with pytest.raises(SpecError) as err:
        op.build_spec(ctx)
    assert err.value.field == "{{ params.k }}"


# --------------------------------------------------------------------------- point 4
@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"checkpoint": {"dir": "/user/airflow/tony/checkpoints/../../bob"}}, "checkpoint.dir"),
        ({"checkpoint": {"model_dir": "hdfs://nn:8020/user/airflow/models/.."}}, "checkpoint.model_dir"),
        ({"checkpoint": {"warm_start_from": "/user/./x"}}, "checkpoint.warm_start_from"),
        ({"quality_gate": {"record": "/a/../b"}}, "quality_gate.record"),
        ({"inputs": {"clicks": {"path": "/data/clicks/dt=../../secret"}}}, "inputs.clicks.path"),
        ({"inputs": {"clicks": {"path": "/data/clicks/../secret/*"}}}, "inputs.clicks.path"),
        ({"files": {"a.py": "hdfs:///user/../mallory/a.py"}}, "files.a.py"),
        ({"python": {"archive": "hdfs:///envs/../e.tar.gz"}}, "python.archive"),
        ({"src_dir": "hdfs:///src/../p.tar.gz"}, "src_dir"),
    ],
)
def test_dot_components_are_refused_in_every_hdfs_path(data: dict[str, Any], field: str) -> None:
    job = {"roles": {"worker": {"command": ["true"]}}, **data}
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(job)
    assert err.value.field == field and "'.' or '..' components" in str(err.value)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"checkpoint": {"model_dir": "/"}}, "checkpoint.model_dir"),
        ({"checkpoint": {"dir": "hdfs://nn:8020/"}}, "checkpoint.dir"),
        ({"checkpoint": {"model_dir": "hdfs:///"}}, "checkpoint.model_dir"),
        ({"checkpoint": {"model_dir": "//"}}, "checkpoint.model_dir"),
    ],
)
def test_the_filesystem_root_is_no_job_folder(data: dict[str, Any], field: str) -> None:
    """The gate publishes beside the model folder and retention deletes under the checkpoint folder:
    at the root that is ``/.lock``, ``/.candidate-<app>`` and every user's home."""
    job = {"roles": {"worker": {"command": ["true"]}}, **data}
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict(job)
    assert err.value.field == field and "is the filesystem's root" in str(err.value)


def test_a_templated_dot_dot_is_refused_after_rendering(tmp_path: Path) -> None:
    op = _operator(tmp_path, _job_file(tmp_path, JOB))
    ctx = _context(workers="1", label="a", day="../../../bob")
    op.render_template_fields(ctx)
    with pytest.raises(SpecError) as err:
        op.build_spec(ctx)
    assert err.value.field == "checkpoint.model_dir" and "'..' component" in str(err.value)


def test_a_base_path_with_dot_components_is_refused() -> None:
    from airflow_provider_tony.yarn.client import TonyClient

    with pytest.raises(SpecError) as err:
        TonyClient(rm_url="http://rm", base_path="/user/airflow/../bob/tony")
    assert err.value.field == "base_path"


@pytest.mark.parametrize(
    ("run_id", "folder"), [(".", "~dots-1"), ("..", "~dots-2"), ("a/../b", "a_.._b"), ("manual__1", "manual__1")]
)
def test_run_ids_map_to_a_folder_of_their_own(tmp_path: Path, run_id: str, folder: str) -> None:
    op = _operator(tmp_path, {"roles": {"worker": {"command": ["true"]}}})
    path = op.default_checkpoint_dir(_context(run_id=run_id))
    assert path == f"/user/airflow/tony/checkpoints/files/train/{folder}"
    assert safe_component(run_id) == folder
    JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"dir": path}})


# --------------------------------------------------------------------------- point 10
def _validate(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    assert cli.main(["validate", str(path)]) != 0
    return capsys.readouterr().err


@pytest.mark.parametrize("instances", [10**7, 10**23])
def test_huge_instances_are_refused_by_the_document_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], instances: int
) -> None:
    err = _validate(tmp_path, f"roles: {{worker: {{instances: {instances}, command: ['true']}}}}\n", capsys)
    assert f"roles.worker.instances: {instances} tasks asked for; a job may run at most {MAX_TASKS}" in err


def test_more_tasks_than_the_document_holds_are_refused_in_all() -> None:
    roles = {"worker": {"instances": MAX_TASKS, "command": ["true"]}, "ps": {"instances": 1, "command": ["true"]}}
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict({"roles": roles})
    assert err.value.field == "roles" and f"{MAX_TASKS + 1} tasks" in str(err.value)
    JobSpec.from_dict({"roles": {"worker": {"instances": MAX_TASKS, "command": ["true"]}}})


def test_3000_long_args_are_refused_before_the_environment_overflows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [f"--arg-{i}={'x' * 110}" for i in range(3000)]
    with pytest.raises(SpecError) as err:  # the operator's dict: the largest field is named
        JobSpec.from_dict({"roles": {"worker": {"script": "/opt/t.py", "args": args}}})
    assert err.value.field == "roles.worker.args" and f"more than the {MAX_SPEC_BYTES}" in str(err.value)
    as_yaml = ", ".join(f"'{arg}'" for arg in args)  # the review's file: refused by its size, before parsing
    err_text = _validate(tmp_path, f"roles: {{worker: {{script: /opt/t.py, args: [{as_yaml}]}}}}\n", capsys)
    assert f"more than the {jobyaml.MAX_BYTES} a job file may hold" in err_text
    fits = [f"--arg-{i}={'x' * 110}" for i in range(400)]  # 50 KB: still one environment variable
    assert JobSpec.from_dict({"roles": {"worker": {"script": "/opt/t.py", "args": fits}}}).roles["worker"].args == fits


def test_5000_nested_brackets_end_in_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _validate(tmp_path, "roles: {worker: {command: " + "[" * 5000 + "]" * 5000 + "}}\n", capsys)
    assert f"hostile.yaml:1:{jobyaml.MAX_DEPTH + 26}: " in err and "nested more than" in err
    assert "Traceback" not in err and "RecursionError" not in err


def test_an_alias_bomb_is_refused_at_its_first_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a: &a ['lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol']"]
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    lines.append("roles: {worker: {command: *i}}")
    text = "\n".join(lines) + "\n"
    assert 400 < len(text) < 1700  # the review's was 1.6 KB
    err = _validate(tmp_path, text, capsys)
    assert "hostile.yaml:2:" in err and "an alias (*a) is not allowed" in err


def test_an_oversized_file_is_refused_before_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _validate(tmp_path, "# " + "x" * jobyaml.MAX_BYTES + "\n", capsys)
    assert f"more than the {jobyaml.MAX_BYTES} a job file may hold" in err


def test_a_refusal_quotes_a_capped_value() -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict({"roles": {"worker": {"command": ["true"], "env": ["x" * 100_000] * 1000}}})
    assert err.value.field == "roles.worker.env" and len(str(err.value)) < 1200


def test_a_value_airflow_marks_as_rendered_is_not_rendered_again(tmp_path: Path) -> None:
    """A mapped job resolved from an XCom is data: Airflow passes its id in ``seen_oids``; a
    ``{{ }}`` inside it (an upstream task's output) stays text."""
    job = {"roles": {"worker": {"script": "/opt/t.py", "args": ["{{ params.label }}"]}}}
    op = _operator(tmp_path, job)
    assert op.render_template(job, _context(label="x"), None, {id(job)}) is job
    assert op.render_template(job, _context(label="x"))["roles"]["worker"]["args"] == ["x"]
