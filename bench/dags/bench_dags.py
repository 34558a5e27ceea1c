"""The DAG the training-overhead benchmark runs: the example script through TonyOperator."""
from __future__ import annotations

import sys
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_tony.operators.tony import TonyOperator

SCRIPT = str(Path(__file__).resolve().parents[2] / "dags" / "training" / "digits_mwms.py")

with DAG("bench_train", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         render_template_as_native_obj=True, params={"args": Param([], type="array")}):
    TonyOperator(task_id="train", poll_interval=2.0, job={
        "roles": {"worker": {"instances": 2, "memory": "1 GiB", "script": SCRIPT, "args": "{{ params.args }}"}},
        "python": {"interpreter": sys.executable}, "heartbeat_timeout": 60})
