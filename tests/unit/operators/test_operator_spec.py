"""TonyOperator's pure pieces: YARN tags, rendering a JobSpec, the default checkpoint dir."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.operators.tony import TonyOperator, _tag
from airflow_provider_tony.runtime.errors import SpecError


class FakeHook:
    base_path = "/user/airflow/tony"
    default_queue = "training"


def context(run_id: str = "scheduled__2026-11-29T02:30:00+00:00", map_index: int = -1) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="nightly", task_id="train", run_id=run_id, map_index=map_index, try_number=2)
    return {"ti": ti}


def operator(**kwargs: Any) -> TonyOperator:
    job = kwargs.pop("job", {"roles": {"worker": {"instances": "2", "command": ["true"]}}})
    op = TonyOperator(task_id="train", job=job, **kwargs)
    op._hook = FakeHook()  # type: ignore[assignment]
    return op


@pytest.mark.parametrize(
    "prefix, value, expected",
    [
        ("tony-dag", "Nightly_Retrain", "tony-dag:nightly_retrain"),  # YARN lower-cases tags
        ("tony-run", "manual__a,b", "tony-run:manual__a_b"),  # commas separate tags
        ("tony-map", -1, "tony-map:-1"),
    ],
)
def test_tags(prefix: str, value: object, expected: str) -> None:
    assert _tag(prefix, value) == expected


def test_long_tag_is_hashed_within_100_chars() -> None:
    tag = _tag("tony-run", "x" * 300)
    assert len(tag) <= 100 and tag.startswith("tony-run:sha1-")
    assert tag == _tag("tony-run", "x" * 300) != _tag("tony-run", "y" * 300)


def test_identity_tags_leave_out_the_try_number() -> None:
    tags = operator().identity_tags(context())
    assert tags == [
        "tony-dag:nightly",
        "tony-task:train",
        "tony-run:scheduled__2026-11-29t02:30:00+00:00",
        "tony-map:-1",
    ]


def test_rendered_numbers_become_ints_and_defaults_fill_in() -> None:
    spec = operator().build_spec(context())
    assert spec.roles["worker"].instances == 2
    assert spec.name == "nightly.train"
    assert "tony" in spec.tags
    # HDFS names allow no ':' and the dir is the same for every try of the run.
    assert spec.checkpoint.dir == "/user/airflow/tony/checkpoints/nightly/train/scheduled__2026-11-29T02_30_00_00_00"


def test_queue_comes_from_the_connection_unless_the_job_names_one() -> None:
    assert operator().build_spec(context()).queue == "training"
    named = operator(job={"queue": "default", "roles": {"worker": {"command": ["true"]}}})
    assert named.build_spec(context()).queue == "default"


def test_mapped_tasks_get_their_own_checkpoint_dir() -> None:
    spec = operator().build_spec(context(map_index=3))
    assert spec.checkpoint.dir.endswith("/map-3")


def test_overrides_win() -> None:
    spec = operator(
        name="custom",
        env={"A": "1"},
        python="/opt/py/bin/python",
        checkpoint_dir="/ckpt/x",
        warm_start_from="/ckpt/yesterday",
    ).build_spec(context())
    assert (spec.name, spec.env, spec.python.interpreter) == ("custom", {"A": "1"}, "/opt/py/bin/python")
    assert (spec.checkpoint.dir, spec.checkpoint.warm_start_from) == ("/ckpt/x", "/ckpt/yesterday")
    archive = operator(python="hdfs:///envs/train.tar.gz").build_spec(context())
    assert archive.python.archive == "hdfs:///envs/train.tar.gz"


@pytest.mark.parametrize(
    "job, field",
    [
        ({"roles": {"worker": {"instances": "two", "command": ["true"]}}}, "roles.worker.instances"),
        ({"roles": {"worker": {"command": "train.py; rm -rf /"}}}, "roles.worker.command"),
        ({"roles": {}}, "roles"),
        (["not", "a", "job"], "job"),
    ],
)
def test_bad_jobs_name_the_field(job: Any, field: str) -> None:
    with pytest.raises(SpecError) as err:
        operator(job=job).build_spec(context())
    assert err.value.field == field, str(err.value)


def test_relative_src_dir_is_read_beside_the_dag_or_the_yaml(tmp_path) -> None:
    from airflow.sdk import DAG

    def in_dag(job: object) -> TonyOperator:
        dag = DAG("projects", schedule=None)
        dag.fileloc = str(tmp_path / "dags" / "projects.py")
        op = operator(job=job)
        op.dag = dag
        return op

    op = in_dag({"src_dir": "trainer", "roles": {"worker": {"script": "main.py"}}})
    assert op.build_spec(context()).src_dir == str(tmp_path / "dags" / "trainer")

    (tmp_path / "dags" / "jobs").mkdir(parents=True)
    (tmp_path / "dags" / "jobs" / "job.yaml").write_text("src_dir: ../trainer\nroles: {worker: {script: main.py}}\n")
    assert in_dag("jobs/job.yaml").build_spec(context()).src_dir == str(tmp_path / "dags" / "trainer")
