"""The example DAGs' nightly retrain over two days, and the day of TFRecords it reads.

Shared by test_airflow.py (the open cluster) and test_secure.py (the Kerberized one).
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from tests._airflow import dags_test, own_runs, result_of, run_state, with_base_path
from tests._docs import block_commands
from tests.integration._runtime import shards_from_reports

TRAINING = Path(__file__).resolve().parents[2] / "dags" / "training"


def write_digits_partition(cluster: Any, base: str, day: str, train_files: int = 4) -> str:
    """The example's day of TFRecords under ``base`` on the cluster's HDFS (as ``tony_digits_partition`` writes it)."""
    from hdfs import InsecureClient

    if str(TRAINING) not in sys.path:
        sys.path.insert(0, str(TRAINING))
    from digits_data import partition_path, write_partition

    remote = partition_path(base, day)
    write_partition(InsecureClient(cluster.webhdfs_url, user=cluster.user), remote, day, train_files=train_files)
    return remote


#: The example's two days: a good one, then one whose training labels went wrong (``degrade``).
DAY1, DAY2 = "2026-11-02", "2026-11-03"


def asset_extras(env: dict[str, str], asset_name: str) -> list[dict[str, Any]]:
    """The ``extra`` of every event on ``asset_name`` in this module's metadata database."""
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = ?", (asset_name,)
        ).fetchall()
    return [json.loads(row[0]) for row in rows]


def train_tries(env: dict[str, str], runs: set[tuple[str, str]]) -> list[tuple[int, int]]:
    """(try_number, max_tries) of the ``train`` task of each of these DAG runs, from the metadata database."""
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [
            row
            for dag_id, run_id in runs
            for row in conn.execute(
                "SELECT try_number, max_tries FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = 'train'",
                (dag_id, run_id),
            ).fetchall()
        ]


def read_json(hdfs: Any, path: str) -> Any:
    with hdfs.read(path) as reader:
        return json.loads(reader.read())


def quality_gate_page_runs() -> list[tuple[str, dict[str, Any] | None]]:
    """The ``airflow dags test`` lines of docs/quality-gate.md's walk-through, as (DAG id, --conf).

    Each line must read ``.venv/bin/airflow dags test DAG "$day" [--conf JSON]``: the test runs
    exactly those DAGs with exactly that conf on its own day (the page's ``$day``); any other
    shape fails here rather than being half followed.
    """
    runs: list[tuple[str, dict[str, Any] | None]] = []
    for line in block_commands("docs/quality-gate.md", "Quality gate"):
        words = shlex.split(line, comments=True)
        if words[1:3] != ["dags", "test"]:
            continue
        assert words[0] == ".venv/bin/airflow" and words[4] == "$day", line
        assert len(words) == 5 or (len(words) == 7 and words[5] == "--conf"), line
        runs.append((words[3], json.loads(words[6]) if len(words) == 7 else None))
    return runs


def two_nightly_days(env: dict[str, str], client: Any, base: str, lineage: Path) -> tuple[dict[str, Any], str]:
    """The example DAGs for two days, on whichever cluster ``client`` (a TonyClient) speaks to.

    Day 1: ``tony_digits_partition`` lands the day's TFRecords and its data event;
    ``tony_nightly_retrain`` trains two workers on disjoint shards that together are
    every train file (each worker's own report, from the job's history), passes the
    quality gate (the first model) and publishes: the record, the model folder, the
    model asset's event. Day 2 is docs/quality-gate.md's two runs (read from the page), the
    day written with ``degrade``: the retrain (warm-started from day 1's last checkpoint,
    training all its epochs into its own folder) fails
    the gate with both figures in the log, is not retried though ``retries=2``,
    publishes nothing (the record and day 1's model stay, no event)
    and keeps its model aside. The OpenLineage events (file transport into
    ``lineage``) name the partitions read and the model folder of the published run
    only. Returns day 1's XCom result and day 2's log.
    """
    from airflow_provider_tony.runtime.messages import JobHistory
    from airflow_provider_tony.runtime.page import render_page

    hdfs, default_fs = client.hdfs(), client.default_fs()
    env = {
        **with_base_path(env, base),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "pytest",
    }
    record, models = f"{base}/models/digits/published.json", f"{base}/models/digits"
    model_events = len(asset_extras(env, "tony_model_digits"))

    def history(app_id: str) -> JobHistory:
        with hdfs.read(f"{base}/history/{app_id}.json") as reader:
            return JobHistory.from_json(reader.read())

    # Day 1: the data lands, the nightly retrain trains on it and publishes (nothing to compare with yet).
    wrote = dags_test(env, "tony_digits_partition", logical_date=f"{DAY1}T01:30:00+00:00")
    assert run_state(wrote) == "success", wrote[-4000:]
    partition = f"{base}/data/digits/dt={DAY1}"
    assert {"day": DAY1, "path": partition, "files": 5, "records": 1797} in asset_extras(env, "tony_data_digits")
    out = dags_test(env, "tony_nightly_retrain", logical_date=f"{DAY1}T01:30:00+00:00")
    assert run_state(out) == "success", out[-4000:]
    first = result_of(out)
    app_id, accuracy = first["application_id"], first["metrics"]["val_accuracy"]
    # A gated model is published as a version folder of its own, named by the pointer (the record).
    # The result line is logged before the gate; the XCom and the model's event carry where the gate
    # published it, the version folder, as does the log line saying so.
    announced = re.findall(r"model (\S+) published: asset", out)
    assert announced and accuracy > 0.5, out[-4000:]
    first = {**first, "model_dir": announced[-1]}
    assert first["model_dir"] == f"{models}/{DAY1}.versions/{app_id}", first["model_dir"]
    tasks = history(app_id).state.tasks  # each worker's last report, as the AM kept it
    reports = [tasks[f"worker:{i}"].progress.metrics for i in (0, 1)]
    shards_from_reports(hdfs, f"{partition}/train", reports)
    assert sum(r["input_records"] for r in reports) == 1437 and {r["eval_records"] for r in reports} == {360}
    assert f"quality gate passed (val_accuracy: this run {accuracy}, published model None)" in out, out[-4000:]
    published = read_json(hdfs, record)
    assert (published["application_id"], published["model_dir"]) == (app_id, first["model_dir"]), published
    assert published["metrics"]["val_accuracy"] == accuracy
    assert {"model.keras", "tony-model.json"} <= set(hdfs.list(first["model_dir"]))
    extras = asset_extras(env, "tony_model_digits")
    assert len(extras) == model_events + 1, extras
    assert (extras[-1]["model_dir"], extras[-1]["application_id"]) == (first["model_dir"], app_id)
    assert extras[-1]["quality_gate"]["passed"] and extras[-1]["quality_gate"]["value"] == accuracy

    # Day 2: its training labels went wrong upstream; the gate keeps yesterday's model published.
    before = own_runs(env)
    # The two runs are docs/quality-gate.md's, read from the page, on the day after day 1.
    (partition_dag, partition_conf), (retrain_dag, retrain_conf) = quality_gate_page_runs()
    assert (partition_dag, partition_conf, retrain_dag, retrain_conf) == (
        "tony_digits_partition",
        {"degrade": True},
        "tony_nightly_retrain",
        None,
    ), "this test checks a degraded day's refusal: follow the page where it changed"
    wrote = dags_test(env, partition_dag, logical_date=DAY2, conf=partition_conf)
    assert run_state(wrote) == "success", wrote[-4000:]
    bad = dags_test(env, retrain_dag, logical_date=DAY2, conf=retrain_conf)
    assert run_state(bad) == "failed", bad[-4000:]
    figures = re.search(r"quality gate FAILED \(val_accuracy: this run ([0-9.]+), published model ([0-9.]+)\)", bad)
    assert figures, bad[-4000:]
    worse = float(figures.group(1))
    assert float(figures.group(2)) == accuracy and worse < accuracy, figures.group(0)
    assert "QualityGateFailed" in bad, bad[-4000:]
    submitted = re.findall(r"submitted (application_\d+_\d+)", bad)
    assert len(submitted) == 1, f"retries=2, yet a failed gate is submitted once: {submitted}"
    # The try count, not only the submissions: a retry re-attaches to the succeeded application and
    # is refused again without submitting (a retryable gate failure reads [(3, 2)] here, one submission).
    runs = {r for r in own_runs(env) - before if r[0] == "tony_nightly_retrain"}
    assert train_tries(env, runs) == [(1, 2)], "one try of the two retries allowed"
    second = submitted[0]
    # Day 2 warm-started from day 1's last checkpoint and trained all its epochs itself, into its own folder.
    checkpoints, warm = f"{base}/checkpoints/digits", result_of(bad)
    assert first["tasks"]["worker:0"]["restored_step"] is None, "day 1 has no yesterday to start from"
    assert any(f"from {checkpoints}/{DAY1}/ckpt-" in e for e in warm["events"]), warm["events"]
    assert warm["checkpoint_dir"] == f"{checkpoints}/{DAY2}", warm["checkpoint_dir"]
    assert remote_checkpoints(hdfs, f"{checkpoints}/{DAY2}")[-1] == 75, "day 2 trained all its epochs itself"
    assert read_json(hdfs, record)["application_id"] == app_id, "the published model stays"
    assert "model.keras" in hdfs.list(first["model_dir"])
    assert hdfs.status(f"{models}/{DAY2}", strict=False) is None, "nothing published for day 2"
    assert "model.keras" in hdfs.list(f"{models}/{DAY2}.rejected-{second}"), "the worse model is kept aside"
    assert len(asset_extras(env, "tony_model_digits")) == model_events + 1, "no model event for it"
    rejected = history(second)
    assert rejected.gate is not None and (rejected.gate.value, rejected.gate.previous) == (worse, accuracy)
    page = render_page(rejected, refresh_s=None)
    assert 'id="quality-gate"' in page and f"<td>{worse:.6g}<" in page and f"<td>{accuracy:.6g}<" in page

    # OpenLineage: the partition read, the model folder of the published run only, the application id.
    events = [json.loads(line) for line in lineage.read_text().splitlines() if line.strip()]
    ours = [e for e in events if e.get("job", {}).get("name") == "tony_nightly_retrain.train"]
    complete = [e for e in ours if e["eventType"] == "COMPLETE"]
    failed = [e for e in ours if e["eventType"] == "FAIL"]
    assert len(complete) == len(failed) == 1, [e.get("eventType") for e in ours]
    done, refused = complete[0], failed[0]
    assert {(i["namespace"], i["name"]) for i in done["inputs"]} >= {
        (default_fs, f"{partition}/train"),
        (default_fs, f"{partition}/eval"),
    }, done["inputs"]
    assert (default_fs, f"{models}/{DAY1}") in {(o["namespace"], o["name"]) for o in done["outputs"]}, done["outputs"]
    assert done["run"]["facets"]["externalQuery"]["externalQueryId"] == app_id
    day2 = f"{base}/data/digits/dt={DAY2}"
    # Day 2 read its partition and warm-started from day 1's checkpoints; its model is no output.
    assert {(i["namespace"], i["name"]) for i in refused["inputs"]} == {
        (default_fs, f"{day2}/train"),
        (default_fs, f"{day2}/eval"),
        (default_fs, f"{base}/checkpoints/digits/{DAY1}"),
    }, refused["inputs"]
    assert all(o["name"] != f"{models}/{DAY2}" for o in refused["outputs"]), "a rejected model is not an output"
    gate = refused["run"]["facets"]["tonyJob"]["qualityGate"]
    assert gate["passed"] is False and (gate["value"], gate["previous"]) == (worse, accuracy), gate
    return first, bad
