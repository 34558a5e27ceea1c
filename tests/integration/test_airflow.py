"""The provider in real Airflow (``airflow dags test`` processes) against the real local cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests._airflow import (
    ACTIVE,
    AIRFLOW,
    TEST_DAGS,
    apps_of_runs,
    dag_tag,
    dags_test,
    own_runs,
    result_of,
    run_state,
    with_base_path,
)
from tests._util import get_json, rm_apps, wait_until
from tests.integration._nightly import (
    DAY1,
    DAY2,
    TRAINING,
    asset_extras,
    read_json,
    train_tries,
    two_nightly_days,
    write_digits_partition,
)
from tests.integration._runtime import shards_from_reports

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_base(cluster) -> Iterator[str]:
    """An HDFS base path of this test's own, under the cluster user's home; removed afterwards.

    The example DAGs keep checkpoints and models under the connection's
    ``base_path``: a fixed one would hand a rerun the previous run's files.
    """
    from hdfs import InsecureClient

    base = f"/user/{cluster.user}/pytest-{uuid.uuid4().hex[:10]}/tony"
    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    assert hdfs.status(base, strict=False) is None
    yield base
    hdfs.delete(base.rsplit("/", 1)[0], recursive=True)


def test_nightly_retrain_publishes_a_model_and_its_gate_refuses_a_worse_one(
    airflow_env, cluster, tony_client, kill_dag_apps, fresh_base, tmp_path: Path
) -> None:
    """Issue 30's acceptance through the example DAGs on the open cluster (``two_nightly_days``; its
    day 2 is the walk-through's two ``airflow dags test`` lines, read from docs/quality-gate.md),
    then what the secure test leaves out: the XCom's link and usage, and the scoring DAG on the model."""
    kill_dag_apps.append("tony_nightly_retrain")
    result, _ = two_nightly_days(airflow_env, tony_client, fresh_base, tmp_path / "openlineage.jsonl")
    app_id = result["application_id"]
    assert result["final_state"] == "SUCCEEDED"
    assert result["tracking_url"] == f"{cluster.rm_url}/cluster/app/{app_id}"
    assert any(e.startswith("worker:1 staged input digits_train: 2 files") for e in result["events"]), result["events"]
    assert result["tasks"]["worker:1"]["state"] in ("SUCCEEDED", "STOPPED")
    used = result["tasks"]["worker:0"]["usage"]  # peak use beside the request, in the XCom
    assert used["peak_rss_bytes"] > 50 << 20 and used["requested_memory_mib"] > 0, used
    assert result["tasks"]["worker:0"]["restored_step"] is None, "trained from scratch, not resumed"
    # The data partition comes from the run's data interval, in the DAG's timezone.
    assert result["metrics"]["partition"] == DAY1
    assert result["checkpoint_dir"] == f"{fresh_base}/checkpoints/digits/{DAY1}"
    # The extra link's target: the RM page of exactly this application.
    with urllib.request.urlopen(result["tracking_url"], timeout=10) as page:
        assert app_id in page.read().decode()
    # The DAG scheduled on the model asset loads the published model from HDFS and scores samples with it.
    scored = dags_test(
        with_base_path(airflow_env, fresh_base),
        "tony_score_new_model",
        conf={"model_dir": result["model_dir"], "samples": 40},
    )
    assert run_state(scored) == "success", scored[-4000:]
    accuracy = re.findall(r"accuracy (\d\.\d+) on 40 samples", scored)
    assert accuracy and float(accuracy[-1]) > 0.3, scored[-4000:]


def test_param_values_reach_the_script_as_literal_text(airflow_env, kill_dag_apps) -> None:
    kill_dag_apps.append("tony_train_on_demand")
    marker = Path(f"/tmp/owned{uuid.uuid4().hex[:6]}")
    label = f"1; touch {marker} $(touch {marker})`id`"  # within the form's 64 characters
    out = dags_test(
        airflow_env,
        "tony_train_on_demand",
        conf={"workers": 2, "epochs": 1, "dataset_date": "2026-11-03", "run_label": label},
    )
    assert run_state(out) == "success", out[-4000:]
    assert result_of(out)["metrics"]["partition"] == f"2026-11-03/{label}"
    assert not marker.exists(), "a param value was executed by a shell"


def test_out_of_range_param_is_rejected_before_yarn(airflow_env, cluster) -> None:
    before = own_runs(airflow_env)
    out = dags_test(airflow_env, "tony_train_on_demand", conf={"workers": 1000})
    assert "1000" in out and ("maximum" in out or "ParamValidationError" in out), out[-3000:]
    # By the tags of this test's own runs: a count of the DAG's applications at
    # the RM's cap of completed applications could not change.
    assert apps_of_runs(cluster.rm_url, own_runs(airflow_env) - before) == []


@pytest.mark.parametrize("deferrable", [False, True], ids=["polling", "deferrable"])
def test_modes_succeed_and_fail_alike(airflow_env, cluster, kill_dag_apps, deferrable: bool) -> None:
    """Both modes end alike; the result carries the run's cost, equal to the RM's final report of it."""
    kill_dag_apps += ["tony_test_ok", "tony_test_fail"]
    ok = dags_test(airflow_env, "tony_test_ok", dagfile=TEST_DAGS, deferrable=deferrable)
    assert run_state(ok) == "success", ok[-4000:]
    result = result_of(ok)
    assert result["final_state"] == "SUCCEEDED"
    rm = httpx.get(f"{cluster.rm_url}/ws/v1/cluster/apps/{result['application_id']}", timeout=30).json()["app"]
    cost = result["cost"]
    assert (cost["memory_mb_seconds"], cost["vcore_seconds"]) == (rm["memorySeconds"], rm["vcoreSeconds"]), rm
    assert cost["memory_mb_seconds"] > 0 and cost["vcore_seconds"] > 0
    assert f"cost of {result['application_id']}: {cost['vcore_seconds']} vcore-seconds" in ok
    failed = dags_test(airflow_env, "tony_test_fail", dagfile=TEST_DAGS, deferrable=deferrable)
    assert run_state(failed) == "failed", failed[-4000:]
    for needle in (
        "worker:1 exited with code 3",
        "behave: worker:1 giving up with code 3",
        "yarn logs -applicationId",
        "::group::worker:1 worker.log",
    ):
        assert needle in failed, (needle, failed[-4000:])
    assert ("Pausing task as DEFERRED" in ok or "TonyTrigger" in ok) == deferrable


def test_execution_timeout_kills_the_application(airflow_env, cluster, kill_dag_apps) -> None:
    kill_dag_apps.append("tony_test_slow")
    out = dags_test(airflow_env, "tony_test_slow", dagfile=TEST_DAGS)
    assert run_state(out) == "failed"
    app_id = re.findall(r"submitted (application_\d+_\d+)", out)[-1]
    app = wait_until(
        lambda: (
            (a := [x for x in rm_apps(cluster.rm_url, tag=dag_tag("tony_test_slow")) if x["id"] == app_id])
            and a[0]["state"] in ("KILLED", "FINISHED", "FAILED")
            and a[0]
        ),
        30,
        f"{app_id} to end",
    )
    assert app["state"] == "KILLED", app
    assert "killed YARN application" in out


def test_reattach_after_the_worker_dies(airflow_env, cluster, kill_dag_apps) -> None:
    """Kill the process running the task mid-job; the next try attaches instead of resubmitting."""
    kill_dag_apps.append("tony_test_medium")
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS.parent)}
    run_id = f"reattach-{uuid.uuid4().hex[:8]}"
    subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, check=True, capture_output=True, timeout=300)
    subprocess.run(
        [AIRFLOW, "dags", "trigger", "tony_test_medium", "--run-id", run_id],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    cmd = [AIRFLOW, "tasks", "test", "tony_test_medium", "train", run_id]
    run_tag = f"tony-run:{run_id}"

    def ours(states: str | None = None) -> list[dict]:
        return [
            a
            for a in rm_apps(cluster.rm_url, states=states, tag=dag_tag("tony_test_medium"))
            if run_tag in a.get("applicationTags", "").split(",")
        ]

    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        running = wait_until(lambda: ours("RUNNING"), 120, "the application to run")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies without any cleanup
        first.wait(timeout=30)
    app_id = running[0]["id"]
    assert [a["id"] for a in ours(ACTIVE)] == [app_id], "the application must survive its worker"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    # Polling mode: ResumableJobMixin kept the id in the task state store before it polled, and
    # reconnects from there; the operator's own tag search (deferrable mode's path, proven by
    # test_operator.py) is not reached, and nothing is submitted.
    assert "Reconnecting to existing job" in text and app_id in text, text[-4000:]
    assert "re-attaching to" not in text and "submitted application_" not in text, text[-4000:]
    assert result_of(text)["final_state"] == "SUCCEEDED"
    assert [a["id"] for a in ours()] == [app_id], "a second application was submitted"


def test_connection_type_and_test_connection(airflow_env, cluster) -> None:
    code = (
        "import json\n"
        "from airflow_provider_tony.hooks.yarn import YarnHook\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "pm = ProvidersManager()\n"
        "hook = pm.hooks.get('tony_yarn')\n"
        "widgets = sorted(k for k in pm.connection_form_widgets if k.startswith('extra__tony_yarn__'))\n"
        "print(json.dumps({'hook': hook.hook_class_name if hook else None, 'widgets': widgets,\n"
        "                  'ok': YarnHook('tony_yarn_default').test_connection(),\n"
        "                  'bad': YarnHook('tony_bad').test_connection()}))\n"
    )
    env = {
        **airflow_env,
        "AIRFLOW_CONN_TONY_BAD": json.dumps({"conn_type": "tony_yarn", "host": "127.0.0.1", "port": 9}),
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["hook"] == "airflow_provider_tony.hooks.yarn.YarnHook"
    assert "extra__tony_yarn__hadoop_conf_dir" in doc["widgets"] and "extra__tony_yarn__keytab" in doc["widgets"]
    ok, message = doc["ok"]
    # The count the ResourceManager reports, whatever the cluster's size (not a literal 1).
    nodes = get_json(f"{cluster.rm_url}/ws/v1/cluster/metrics")["clusterMetrics"]["activeNodes"]
    assert ok and nodes >= 1 and f"{nodes} active node(s)" in message, message
    bad_ok, bad_message = doc["bad"]
    assert not bad_ok and "127.0.0.1:9" in bad_message and "unreachable" in bad_message


def test_a_script_failure_is_not_retried_unless_its_code_is_listed(airflow_env, cluster, kill_dag_apps) -> None:
    kill_dag_apps += ["tony_test_fail_no_retry", "tony_test_fail_retry_code"]
    before = own_runs(airflow_env)
    started = time.monotonic()
    out = dags_test(airflow_env, "tony_test_fail_no_retry", dagfile=TEST_DAGS)
    elapsed = time.monotonic() - started
    assert run_state(out) == "failed", out[-4000:]
    assert "Not retried: a retry would fail the same way" in out, out[-4000:]
    runs = {r for r in own_runs(airflow_env) - before if r[0] == "tony_test_fail_no_retry"}
    assert len(apps_of_runs(cluster.rm_url, runs)) == 1, "retries=2, yet exit 3 must be submitted once"
    print(f"non-retryable failure failed the task in {elapsed:.1f}s (airflow dags test, no retries)")

    out = dags_test(airflow_env, "tony_test_fail_retry_code", dagfile=TEST_DAGS)
    assert run_state(out) == "failed", out[-4000:]
    runs = {r for r in own_runs(airflow_env) - before if r[0] == "tony_test_fail_retry_code"}
    assert len(apps_of_runs(cluster.rm_url, runs)) == 2, "retryable_exit_codes: [3] must give the retry a new app"


def test_the_pytorch_nightly_retrain_publishes_through_its_gate_and_refuses_a_worse_day(
    airflow_env, cluster, tony_client, kill_dag_apps, fresh_base, tmp_path: Path
) -> None:
    """``tony_nightly_retrain_torch``: two DDP ranks on the day's TFRecords (read without TensorFlow,
    each its own shard), ``accuracy`` through the gate; the first model is published with its asset
    event and lineage and loads into the script's model; a degraded day is refused, not retried."""
    import torch

    if str(TRAINING) not in sys.path:
        sys.path.insert(0, str(TRAINING))
    from digits_data import partition_path, write_partition
    from digits_torch import build_model

    kill_dag_apps.append("tony_nightly_retrain_torch")
    hdfs, default_fs = tony_client.hdfs(), tony_client.default_fs()
    lineage = tmp_path / "openlineage.jsonl"
    env = {
        **with_base_path(airflow_env, fresh_base),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "pytest",
    }
    models, record = f"{fresh_base}/models/digits_torch", f"{fresh_base}/models/digits_torch/published.json"
    partition = write_digits_partition(cluster, fresh_base, DAY1)
    out = dags_test(env, "tony_nightly_retrain_torch", logical_date=f"{DAY1}T01:30:00+00:00")
    assert run_state(out) == "success", out[-4000:]
    first = result_of(out)
    app_id, accuracy = first["application_id"], first["metrics"]["accuracy"]
    assert accuracy > 0.5 and first["metrics"]["partition"] == DAY1, first["metrics"]
    from airflow_provider_tony.runtime.messages import JobHistory

    with hdfs.read(f"{fresh_base}/history/{app_id}.json") as reader:
        tasks = JobHistory.from_json(reader.read()).state.tasks  # each rank's last report, as the AM kept it
    reports = [tasks[f"worker:{i}"].progress.metrics for i in (0, 1)]
    shards_from_reports(hdfs, f"{partition}/train", reports)  # each rank its own files, together all
    assert sum(r["input_records"] for r in reports) == 1437 and {r["eval_records"] for r in reports} == {360}
    assert f"quality gate passed (accuracy: this run {accuracy}, published model None)" in out, out[-4000:]
    published = read_json(hdfs, record)
    assert published["application_id"] == app_id and published["metrics"]["accuracy"] == accuracy
    model_dir = published["model_dir"]
    assert {"model.pt", "model.json"} <= set(hdfs.list(model_dir)), hdfs.list(model_dir)
    local = tmp_path / "model"
    hdfs.download(model_dir, str(local))
    model = build_model(json.loads((local / "model.json").read_text())["hidden"])
    model.load_state_dict(torch.load(local / "model.pt", map_location="cpu"))  # strict: every tensor, every shape
    extras = asset_extras(env, "tony_model_digits_torch")
    assert extras and extras[-1]["application_id"] == app_id and extras[-1]["quality_gate"]["passed"], extras
    events = [json.loads(line) for line in lineage.read_text().splitlines() if line.strip()]
    done = [e for e in events if e.get("job", {}).get("name") == "tony_nightly_retrain_torch.train"]
    complete = [e for e in done if e["eventType"] == "COMPLETE"]
    assert len(complete) == 1, [e.get("eventType") for e in done]
    assert {(i["namespace"], i["name"]) for i in complete[0]["inputs"]} >= {
        (default_fs, f"{partition}/train"),
        (default_fs, f"{partition}/eval"),
    }, complete[0]["inputs"]

    # Day 2's training labels went wrong upstream: the gate keeps day 1's model published.
    before = own_runs(env)
    write_partition(hdfs, partition_path(fresh_base, DAY2), DAY2, degrade=True)
    bad = dags_test(env, "tony_nightly_retrain_torch", logical_date=f"{DAY2}T01:30:00+00:00")
    assert run_state(bad) == "failed", bad[-4000:]
    figures = re.search(r"quality gate FAILED \(accuracy: this run ([0-9.]+), published model ([0-9.]+)\)", bad)
    assert figures and float(figures.group(2)) == accuracy and float(figures.group(1)) < accuracy, bad[-4000:]
    assert "QualityGateFailed" in bad and len(re.findall(r"submitted (application_\d+_\d+)", bad)) == 1
    runs = {r for r in own_runs(env) - before if r[0] == "tony_nightly_retrain_torch"}
    assert train_tries(env, runs) == [(1, 2)], "one try of the two retries allowed"
    assert read_json(hdfs, record)["application_id"] == app_id, "the published model stays"
    assert hdfs.status(f"{models}/{DAY2}", strict=False) is None, "nothing published for day 2"
    assert len(asset_extras(env, "tony_model_digits_torch")) == len(extras), "no model event for it"
