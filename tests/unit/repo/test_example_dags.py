"""The example DAGs parse and carry what docs/airflow.md says of them (no cluster: a DagBag of ``dags/``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.support.paths import REPO

DAGS = REPO / "dags"


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import os

    os.environ.setdefault("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow-home")))
    from airflow.dag_processing.dagbag import DagBag

    found = DagBag(str(DAGS))
    assert found.import_errors == {}, found.import_errors
    return found


def test_every_example_dag_parses(bag: Any) -> None:
    assert set(bag.dag_ids) >= {
        "tony_digits_partition",
        "tony_hparam_sweep",
        "tony_nightly_retrain",
        "tony_nightly_retrain_torch",
        "tony_retrain_on_landing",
        "tony_score_new_model",
        "tony_train_on_demand",
    }


def test_the_nightly_retrain_reports_a_run_not_done_in_four_hours(bag: Any) -> None:
    from datetime import timedelta

    from airflow_provider_tony.alerts import log_missed_deadline

    (alert,) = bag.dags["tony_nightly_retrain"].deadline
    assert alert.interval == timedelta(hours=4)
    assert alert.callback.path == f"{log_missed_deadline.__module__}.{log_missed_deadline.__qualname__}"


def test_the_landing_dag_is_scheduled_on_a_watched_asset(bag: Any) -> None:
    from airflow_provider_tony.triggers.hdfs_partition import HdfsPartitionTrigger

    dag = bag.dags["tony_retrain_on_landing"]
    (asset,) = dag.timetable.asset_condition.objects
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, HdfsPartitionTrigger) and watcher.trigger.path == "data/digits-landed/dt=*"


def test_the_sweep_names_its_trials_and_publishes_once_after_them(bag: Any) -> None:
    from airflow_provider_tony.assets import model_asset

    dag = bag.dags["tony_hparam_sweep"]
    train, publish = dag.get_task("train"), dag.get_task("publish_best")
    assert train.map_index_template == "{{ task.job['name'] }}"
    assert train.partial_kwargs["publish"] is False, "a trial publishes nothing itself"
    assert publish.upstream_task_ids == {"train"} and publish.model_asset == model_asset("digits-sweep")
    trial_job = train.expand_input.value["job"][0]
    assert (
        publish.job["checkpoint"] == trial_job["checkpoint"]
        and publish.job["quality_gate"] == trial_job["quality_gate"]
    )


def test_the_pytorch_retrain_trains_on_the_same_partition_through_its_own_gate(bag: Any) -> None:
    """Scheduled on the same data asset as the TensorFlow retrain, reading the same two inputs, but
    a PyTorch job with a gate, record, checkpoints and model asset of its own (one model's figures
    never judge the other's)."""
    from airflow_provider_tony.assets import data_asset

    torch_dag, tf_dag = bag.dags["tony_nightly_retrain_torch"], bag.dags["tony_nightly_retrain"]
    assert list(torch_dag.timetable.asset_condition.objects) == [data_asset("digits")]
    job, tf_job = torch_dag.get_task("train").job, tf_dag.get_task("train").job
    assert job["framework"] == "pytorch" and job["roles"]["worker"]["script"] == "digits_torch.py"
    assert (DAGS / job["src_dir"] / "digits_torch.py").is_file() and (DAGS / job["src_dir"] / "tfrecords.py").is_file()
    assert job["inputs"] == tf_job["inputs"]
    assert job["quality_gate"]["metric"] == "accuracy"
    assert job["quality_gate"]["record"].endswith("/models/digits_torch/published.json")
    assert job["quality_gate"]["record"] != tf_job["quality_gate"]["record"]
    assert torch_dag.get_task("train").model_asset.name != tf_dag.get_task("train").model_asset.name


def test_make_demo_retrains_unattended_so_no_model_waits_for_an_approval(bag: Any) -> None:
    """``airflow dags test`` parks an ``ApprovalOperator`` until a person answers (12 hours here):
    the demo's run conf is a valid one for the DAG and sets a tolerance under which a slightly
    worse model is refused, never held for approval."""
    import copy
    import importlib.util
    import json

    from airflow_provider_tony.runtime.gate import judge, within_tolerance
    from airflow_provider_tony.runtime.spec_data import QualityGate

    spec = importlib.util.spec_from_file_location("tony_demo", REPO / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    line = demo.retrain_command("airflow", "2026-01-01T02:30:00+01:00")
    assert line[:5] == ["airflow", "dags", "test", "tony_nightly_retrain", "2026-01-01T02:30:00+01:00"]
    conf = json.loads(line[line.index("--conf") + 1])
    params = copy.deepcopy(bag.dags["tony_nightly_retrain"].params)
    params.update(conf)  # as a run's conf overrides them; a value the Param's pattern refuses fails here
    resolved = params.validate()
    gate = QualityGate(metric="val_accuracy", mode="max", tolerance=resolved["tolerance"], approval=True)
    gate.validate()
    worse = 0.999 * 0.97  # a model a little worse than the published one: refused (the gate holds only a pass)
    assert not judge(gate, worse, 0.97)[0]
    # Under the DAG's own default tolerance the same model would wait for a person: the conf is what prevents it.
    own = bag.dags["tony_nightly_retrain"].params.validate()["tolerance"]
    default = QualityGate(metric="val_accuracy", mode="max", tolerance=own, approval=True)
    default.validate()
    assert judge(default, worse, 0.97)[0] and within_tolerance(default, worse, 0.97)
