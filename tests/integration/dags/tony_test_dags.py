"""DAGs only the tests run: failing jobs, jobs that run until they are killed, resuming jobs.

``deferrable`` follows ``[operators] default_deferrable`` (set per test run
through ``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE``), so one DAG serves both modes.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

# Beside this file: Airflow puts the DAG folder on sys.path, the repository root is not there.
from training_jobs import chaos_job, resume_job, strategy_job, torch_job

from airflow_provider_tony.operators.tony import TonyOperator

BEHAVE = str(Path(__file__).resolve().parent.parent / "jobs" / "behave.py")
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def behave_job(*args: str, **extra: object) -> dict:
    return {
        "roles": {"worker": {"instances": 2, "memory": "256 MiB", "script": BEHAVE, "args": list(args)}},
        "python": {"interpreter": sys.executable},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 10,
        **extra,
    }


with DAG("tony_test_fail", schedule=None, start_date=START, catchup=False):
    TonyOperator(task_id="train", job=behave_job("exit", "--index", "1", "--code", "3"), poll_interval=1.0)

with DAG("tony_test_ok", schedule=None, start_date=START, catchup=False):
    TonyOperator(task_id="train", job=behave_job("ok", **{"success_policy": "all_workers"}), poll_interval=1.0)

with DAG("tony_test_slow", schedule=None, start_date=START, catchup=False):
    TonyOperator(task_id="train", job=behave_job("sleep"), poll_interval=1.0, execution_timeout=timedelta(seconds=45))

with DAG("tony_test_medium", schedule=None, start_date=START, catchup=False):
    TonyOperator(
        task_id="train", job=behave_job("sleep", "--seconds", "25", success_policy="all_workers"), poll_interval=1.0
    )


def retried_dag(dag_id: str, job: dict) -> None:
    """A DAG whose one task ``train`` runs ``job`` with one Airflow retry a second later."""
    with DAG(
        dag_id,
        schedule=None,
        start_date=START,
        catchup=False,
        default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
    ):
        TonyOperator(task_id="train", poll_interval=1.0, job=job)


# Resume through an Airflow retry: the first try dies mid-training (tests/integration/test_checkpoints.py).
retried_dag("tony_test_resume", resume_job())
# Node loss under Airflow (tests/chaos/test_airflow_reattach.py): three spread workers whose gang
# restarts inside the application, and a real MultiWorkerMirroredStrategy job without restarts,
# for Airflow's retry to resume.
retried_dag("tony_chaos_restart", chaos_job(max_restarts=2, plain=True))
retried_dag("tony_chaos_retry", strategy_job("mwms-loop", max_restarts=0))
# The same through PyTorch DDP (tests/chaos/test_torch_node_loss.py): gloo's survivors fail at once.
retried_dag("tony_chaos_torch_retry", torch_job(max_restarts=0))

# Retries only where they help: the script's own exit 3 fails the task at once despite
# retries=2; listed in retryable_exit_codes, the same exit is retried (a new application).
for _dag_id, _extra in (("tony_test_fail_no_retry", {}), ("tony_test_fail_retry_code", {"retryable_exit_codes": [3]})):
    with DAG(
        _dag_id,
        schedule=None,
        start_date=START,
        catchup=False,
        default_args={"retries": 2 if not _extra else 1, "retry_delay": timedelta(seconds=1)},
    ):
        TonyOperator(
            task_id="train", job=behave_job("exit", "--index", "1", "--code", "3", **_extra), poll_interval=1.0
        )

# issue 27: a training script that attacks everything downstream of it (tests/integration/test_trust_airflow.py)
HOSTILE = str(Path(__file__).resolve().parent.parent / "jobs" / "hostile.py")
with DAG("tony_test_hostile", schedule=None, start_date=START, catchup=False):
    TonyOperator(
        task_id="train",
        job={
            "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": HOSTILE, "args": ["24"]}},
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,
        },
        poll_interval=1.0,
    )

# issue 35: a job file whose string param lands inside args (tests/integration/test_trust_airflow.py)
with DAG(
    "tony_test_param_yaml",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"label": "plain", "tag": "a", "workers": 1},
):
    TonyOperator(task_id="train", job="param_job.yaml", python=sys.executable, poll_interval=1.0)

# issue 40: a worker YARN kills for its memory (tests/integration/test_memory.py). Both tasks have
# retries=2; without memory_retry the kill fails the task on its first try, with it the second try
# asks for twice the memory and the same script fits.
HOG = str(Path(__file__).resolve().parent.parent / "jobs" / "hog.py")


def hog_job(**extra: object) -> dict:
    """Two MultiWorkerMirroredStrategy-style workers; worker:1 holds 700 MiB in a 512 MiB container."""
    hog = {"instances": 2, "memory": "512 MiB", "script": HOG, "args": ["--index", "1", "--mib", "700"]}
    return {
        "roles": {"worker": hog},
        "python": {"interpreter": sys.executable},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 10,
        "success_policy": "all_workers",
        **extra,
    }


with DAG(
    "tony_test_memory",
    schedule=None,
    start_date=START,
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=1)},
):
    TonyOperator(task_id="as_written", job=hog_job(), poll_interval=1.0)
    TonyOperator(task_id="memory_retry", job=hog_job(memory_retry={"factor": 2, "max": "1 GiB"}), poll_interval=1.0)
