"""A learning-rate sweep: one YARN application per mapped task, two at a time.

Dynamic task mapping expands one ``TonyOperator`` over the rates; each mapped
task's application carries its map index in its YARN tags, so a retry of
``train[1]`` re-attaches to ``train[1]``'s application and no other; Airflow's
UI names each mapped task by its job's name (``map_index_template``).
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"
LEARNING_RATES = [0.01, 0.05, 0.2]


def job(learning_rate: float) -> dict:
    return {
        "name": f"digits-sweep-lr{learning_rate}",
        "roles": {
            "worker": {
                "instances": 2,
                "memory": "1 GiB",
                "script": str(TRAINING / "digits_mwms.py"),
                "args": ["--epochs", "2", "--steps-per-epoch", "15", "--learning-rate", str(learning_rate)],
            }
        },
        "heartbeat_timeout": 60,
        "deadline": 3600,
    }


with DAG(dag_id="tony_hparam_sweep", schedule=None, catchup=False, tags=["tony", "sweep"], doc_md=__doc__) as dag:
    # The grid and the task list name each trial by its job (digits-sweep-lr0.05), not train[1].
    TonyOperator.partial(
        task_id="train", max_active_tis_per_dag=2, poll_interval=2.0, map_index_template="{{ task.job['name'] }}"
    ).expand(job=[job(lr) for lr in LEARNING_RATES])
