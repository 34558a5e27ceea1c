"""Nightly retraining on the day's data where it lives: two tf-keras workers (MultiWorkerMirroredStrategy) on YARN.

Scheduled on the ``digits`` data asset: each partition ``tony_digits_partition``
lands on HDFS (``<base_path>/data/digits/dt=<day>``) starts a run that trains on
exactly that partition. The job declares it as two inputs: ``digits_train``
(``sharding: shard``: the ``train/`` files are dealt between the two workers,
each reads only its own) and ``digits_eval`` (the held-out ``eval/`` file, every
worker evaluates on it). TonY checks both exist before submitting (a missing
partition fails the try as retryable: the next one looks again) and stages
each worker's files to its local disk before the script starts. A manual run
(or ``airflow dags test``) without an event trains on the partition of its
logical date, in the DAG's timezone.

The model goes to HDFS under the day, but is published only when it passes the
quality gate: its ``val_accuracy`` on the held-out file must be at least that
of the last published model (kept in ``<base_path>/models/digits/published.json``;
the first model passes). A worse model (a day whose labels went wrong; try
``tony_digits_partition`` with ``degrade``) stays as
``models/digits/<day>.rejected-<application id>``, emits no model event, and
fails the task with ``QualityGateFailed``, not retried: both figures are in the
log, the ``quality_gate`` XCom and the job page. Retries back off exponentially;
a retry re-attaches to a still-running application instead of submitting a
second one, or resumes from the run's last checkpoint on HDFS. With
``warm_start`` (default on) a run that has no checkpoint yet starts from the
day before's weights. Each published model emits an event on the ``digits``
model asset, which schedules ``tony_score_new_model``.

The gate has a ``tolerance`` (the ``tolerance`` param, 1% by default) with
``approval``: a model that scores below the published one but within the
tolerance is not published at once, nor refused. It waits as a candidate and a
person is asked (Airflow's human-in-the-loop ``ApprovalOperator``,
``approve_model``, under "Required Actions" in the UI, the figures in its body).
"Approve" publishes it (``publish_approved``, with the model event); "Reject", or
no answer within 12 hours, leaves it a candidate. A model at least as good skips
both tasks. A run still not done 4 hours after it was queued is reported by a
deadline alert (the triggerer's log; point it at a pager), in the scheduler's runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, task

from airflow_provider_tony.alerts import run_deadline
from airflow_provider_tony.assets import data_asset, model_asset
from airflow_provider_tony.operators.publish_best import TonyPublishBestOperator
from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"
TZ = "Europe/Amsterdam"
DIGITS_DATA = data_asset("digits")
# The partition's day, from the task below: the triggering event's, else the logical date's.
DAY = "ti.xcom_pull(task_ids='partition_day')"
BASE_EXPR = "(conn.tony_yarn_default.extra_dejson.base_path or '/user/airflow/tony')"
BASE = "{{ " + BASE_EXPR + " }}"
PARTITION = BASE + "/data/digits/dt={{ " + DAY + " }}"
# The gate's verdict on tonight's model, as the approval's body shows it.
VERDICT = "ti.xcom_pull(task_ids='train')['quality_gate']"
JOB: dict[str, Any] = {
    "queue": "default",
    "roles": {
        "worker": {
            "instances": 2,
            "memory": "1 GiB",
            "vcores": 1,
            "script": str(TRAINING / "digits_mwms.py"),
            "args": [
                "--epochs",
                "3",
                "--steps-per-epoch",
                "25",
                "--partition",
                "{{ " + DAY + " }}",
                "--input",
                "digits_train",
                "--eval-input",
                "digits_eval",
            ],
        },
    },
    "heartbeat_timeout": 60,
    "deadline": 3600,
    "checkpoint": {"model_dir": BASE + "/models/digits/{{ " + DAY + " }}"},
    # Publish a model at least as good on its held-out data as the last published one; one worse by at most
    # the tolerance waits for a person (approval). The model folder changes per day, so the last published
    # figures live in a record beside them.
    "quality_gate": {
        "metric": "val_accuracy",
        "mode": "max",
        "record": BASE + "/models/digits/published.json",
        "tolerance": "{{ params.tolerance }}",
        "approval": True,
    },
    "inputs": {
        # Each worker trains on its own train/ files; every worker evaluates on eval/.
        "digits_train": {"path": PARTITION + "/train", "sharding": "shard"},
        "digits_eval": {"path": PARTITION + "/eval"},
    },
}

with DAG(
    dag_id="tony_nightly_retrain",
    schedule=[DIGITS_DATA],
    start_date=pendulum.datetime(2026, 1, 1, tz=TZ),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=20),
    },
    tags=["tony", "training"],
    doc_md=__doc__,
    # Tomorrow's model has to be there in the morning: a run not done 4 hours after it was queued is reported.
    deadline=run_deadline(timedelta(hours=4), "tonight's retrain"),
    params={
        "warm_start": Param(True, type="boolean", title="Warm start from yesterday's checkpoint"),
        "tolerance": Param(
            "1%",
            type="string",
            pattern=r"^[0-9]+(\.[0-9]+)?%?$",
            title="How far below the published model a model may score and still be offered for approval",
            description="A number in the metric's units (0.005) or a percentage of the published figure (1%)",
        ),
    },
) as dag:

    @task
    def partition_day(**context: Any) -> str:
        """The day of the partition to train on: the newest data event's, else the run's logical date."""
        events = context["triggering_asset_events"].get(DIGITS_DATA) or []
        if events:
            return str(events[-1].extra["day"])
        when = context["logical_date"] or context["dag_run"].run_after
        return str(when.in_timezone(TZ).to_date_string())

    train = TonyOperator(
        task_id="train",
        execution_timeout=timedelta(hours=2),
        model_asset=model_asset("digits"),  # each published model schedules tony_score_new_model
        checkpoint_dir=BASE + "/checkpoints/digits/{{ " + DAY + " }}",
        warm_start_from="{{ ("
        + BASE_EXPR
        + " ~ '/checkpoints/digits/' ~ macros.ds_add("
        + DAY
        + ", -1)) if params.warm_start else '' }}",
        job=JOB,
    )

    @task.short_circuit
    def needs_approval(result: dict[str, Any]) -> bool:
        """Only a model held within the tolerance asks a person; otherwise approval and publication are skipped."""
        return bool((result.get("quality_gate") or {}).get("awaiting_approval"))

    approve = ApprovalOperator(
        task_id="approve_model",
        subject="Publish the digits model of {{ " + DAY + " }}? It scores within the tolerance below the published one",
        body="{% set v = "
        + VERDICT
        + " %}{{ v.metric }} {{ v.value }} against the published model's {{ v.previous }}: {{ v.reason }}. "
        "The model waits at {{ v.model_dir }}.",
        defaults="Reject",  # no answer: the model stays a candidate
        response_timeout=timedelta(hours=12),
        retries=0,
    )
    publish = TonyPublishBestOperator(
        task_id="publish_approved", trials=[train.output], job=JOB, approved=True, model_asset=model_asset("digits")
    )
    partition_day() >> train
    needs_approval(train.output) >> approve >> publish
