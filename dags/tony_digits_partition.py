"""Land a day's partition of the digits on HDFS as TFRecords, and announce it on the ``digits`` data asset.

Stands for the upstream job that writes the day's data where it lives:
``<base_path>/data/digits/dt=<day>/`` with ``train/part-0000N.tfrecord``, a held-out
``eval/part-00000.tfrecord`` and ``_SUCCESS`` (the connection's ``base_path``;
the day is the run's logical date's, in the DAG's timezone). The partition appears
whole (written under a temporary name, then renamed). Its event on
``data_asset("digits")`` (``extra``: ``day``, ``path``) schedules
``tony_nightly_retrain``, which trains on exactly that partition. ``degrade``
shifts every training label by one digit (the held-out labels stay right): the
night's model is worse on purpose, and ``tony_nightly_retrain``'s quality gate
refuses to publish it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_provider_tony.assets import data_asset

TRAINING = Path(__file__).resolve().parent / "training"
TZ = "Europe/Amsterdam"
DIGITS_DATA = data_asset("digits")

with DAG(
    dag_id="tony_digits_partition",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz=TZ),
    catchup=False,
    max_active_runs=1,
    tags=["tony", "data"],
    doc_md=__doc__,
    params={"degrade": Param(False, type="boolean", title="Shift the training labels by one (a worse model)")},
):

    @task(outlets=[DIGITS_DATA])
    def write_partition(**context: Any) -> dict[str, Any]:
        """Write the day's TFRecords under the connection's base_path and emit the data asset's event."""
        if str(TRAINING) not in sys.path:
            sys.path.insert(0, str(TRAINING))
        from digits_data import partition_path, write_partition

        from airflow_provider_tony.hooks.yarn import YarnHook

        when = context["logical_date"] or context["dag_run"].run_after
        day = when.in_timezone(TZ).to_date_string()
        hook = YarnHook()
        try:
            remote = partition_path(hook.base_path, day)
            counts = write_partition(hook.hdfs(), remote, day, degrade=bool(context["params"]["degrade"]))
        finally:
            hook.close()
        extra = {"day": day, "path": remote, "files": len(counts), "records": sum(counts.values())}
        context["outlet_events"][DIGITS_DATA].extra = extra
        print(f"wrote {extra['records']} records in {extra['files']} files to {remote}")
        return extra

    write_partition()
