"""Airflow as the cluster suites drive it: ``airflow dags test`` processes, their output, their DAG runs.

Shared by tests/integration, tests/chaos and tests/ha (the ``airflow_env`` fixture that gives each
test module its own metadata database is in tests/conftest.py). No test module imports another:
what several of them use lives here.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests._cluster import REPO
from tests._util import assert_no_java_started, hide_jdks_prefix, rm_apps

TEST_DAGS = REPO / "tests" / "integration" / "dags" / "tony_test_dags.py"


AIRFLOW = str(Path(sys.executable).parent / "airflow")


ACTIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


def dag_tag(dag_id: str) -> str:
    return f"tony-dag:{dag_id}"


def own_runs(env: dict[str, str]) -> set[tuple[str, str]]:
    """(dag_id, run_id) of every DAG run in this test module's own metadata database.

    ``airflow dags test`` picks its run id from the clock, so the runs a test
    made are known only afterwards, from its own ``AIRFLOW_HOME``.
    """
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return set(conn.execute("SELECT dag_id, run_id FROM dag_run").fetchall())


def apps_of_runs(rm_url: str, runs: set[tuple[str, str]], states: str | None = None) -> list[dict[str, Any]]:
    """The YARN applications the operator submitted for exactly these DAG runs (by their tags)."""
    from airflow_provider_tony.operators.tony import _tag

    found = []
    for dag_id in {dag for dag, _ in runs}:
        run_tags = {_tag("tony-run", run_id) for dag, run_id in runs if dag == dag_id}
        found += [
            a
            for a in rm_apps(rm_url, states=states, tag=dag_tag(dag_id))
            if run_tags & set(a.get("applicationTags", "").split(","))
        ]
    return found


def with_base_path(env: dict[str, str], base: str) -> dict[str, str]:
    """``env`` with the default connection's HDFS base path set to ``base``."""
    conn = json.loads(env["AIRFLOW_CONN_TONY_YARN_DEFAULT"])
    conn["extra"] = {**conn.get("extra", {}), "base_path": base}
    return {**env, "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(conn)}


def dags_test(
    env: dict[str, str],
    dag_id: str,
    *,
    dagfile: Path | None = None,
    conf: dict | None = None,
    logical_date: str | None = None,
    deferrable: bool = False,
    timeout: float = 600,
) -> str:
    cmd = [AIRFLOW, "dags", "test", dag_id]
    if logical_date:
        cmd.append(logical_date)
    if dagfile:
        cmd += ["--dagfile-path", str(dagfile)]
    if conf is not None:
        cmd += ["--conf", json.dumps(conf)]
    run_env = {**env, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": str(deferrable)}
    if dagfile:  # Airflow wants the file inside the dags folder (bundle)
        run_env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dagfile.parent)
    proc = subprocess.run([*hide_jdks_prefix(), *cmd], env=run_env, capture_output=True, text=True, timeout=timeout)
    assert_no_java_started(run_env)
    return proc.stdout + proc.stderr


def run_state(output: str) -> str:
    found = re.findall(r"DagRun Finished: .*?state=(\w+)", output)
    assert found, f"the DAG run never finished:\n{output[-4000:]}"
    return found[-1]


def result_of(output: str) -> dict:
    found = re.findall(r"result: (\{.*\})", output)
    assert found, f"no operator result logged:\n{output[-4000:]}"
    return json.loads(found[-1].split(" [airflow")[0].rsplit("}", 1)[0] + "}")
