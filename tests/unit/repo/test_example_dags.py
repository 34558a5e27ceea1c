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
