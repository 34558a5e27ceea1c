"""The provider in real Airflow (``airflow dags test`` processes) against the real local cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests._util import assert_no_java_started, get_json, hide_jdks_prefix, rm_apps, wait_until, without_java

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).parent / "dags" / "tony_test_dags.py"
AIRFLOW = str(Path(sys.executable).parent / "airflow")
ACTIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


@pytest.fixture(scope="module")
def airflow_env(cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False",
    }
    # Airflow as its official image runs it: no JDK. dags_test fails when anything tried to start java.
    env = without_java(env, home / "no-java")
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


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


@pytest.fixture
def kill_dag_apps(cluster, airflow_env) -> Iterator[list[str]]:
    """DAG ids whose applications, submitted by this test, must not outlive it.

    Only applications of the DAG runs this test created (in its own metadata
    database) are killed: a ``make demo`` or another checkout running the same
    DAG at the same time carries other run ids and is left alone.
    """
    dags: list[str] = []
    before = own_runs(airflow_env)
    yield dags
    from airflow_provider_tony.yarn.client import TonyClient

    mine = {(dag, run) for dag, run in own_runs(airflow_env) - before if dag in dags}
    left = apps_of_runs(cluster.rm_url, mine, states=ACTIVE)
    if left:
        with TonyClient.from_env() as client:
            for app in left:
                client.kill(app["id"])


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


def test_nightly_retrain_publishes_a_model(airflow_env, cluster, kill_dag_apps, fresh_base) -> None:
    kill_dag_apps.append("tony_nightly_retrain")
    # The day's data lands first: the writer DAG puts TFRecords on HDFS and emits the data asset's event.
    env = with_base_path(airflow_env, fresh_base)
    wrote = dags_test(env, "tony_digits_partition", logical_date="2026-11-02T01:30:00+00:00")
    assert run_state(wrote) == "success", wrote[-4000:]
    partition = f"{fresh_base}/data/digits/dt=2026-11-02"
    # Its own checkpoint and model folders: nothing of an earlier run to resume from or to find.
    out = dags_test(env, "tony_nightly_retrain", logical_date="2026-11-02T01:30:00+00:00")
    assert run_state(out) == "success", out[-4000:]
    result = result_of(out)
    # worker:0 trained on its own shard of the partition: 2 of its 4 train files, from local disk.
    assert len(result["metrics"]["input_files"].split(",")) == 2, result["metrics"]
    assert 0 < result["metrics"]["input_records"] < 1437
    assert result["metrics"]["eval_records"] == 360
    assert any(e.startswith("worker:1 staged input digits_train: 2 files") for e in result["events"]), result["events"]
    app_id = result["application_id"]
    assert result["final_state"] == "SUCCEEDED"
    assert result["tracking_url"] == f"{cluster.rm_url}/cluster/app/{app_id}"
    assert result["metrics"]["val_accuracy"] > 0.3
    assert result["tasks"]["worker:1"]["state"] in ("SUCCEEDED", "STOPPED")
    used = result["tasks"]["worker:0"]["usage"]  # peak use beside the request, in the XCom
    assert used["peak_rss_bytes"] > 50 << 20 and used["requested_memory_mib"] > 0, used
    assert result["tasks"]["worker:0"]["restored_step"] is None, "trained from scratch, not resumed"
    # The data partition comes from the run's data interval, in the DAG's timezone.
    assert result["metrics"]["partition"] == "2026-11-02"
    assert result["checkpoint_dir"] == f"{fresh_base}/checkpoints/digits/2026-11-02"
    assert result["model_dir"] == f"{fresh_base}/models/digits/2026-11-02"
    from hdfs import InsecureClient

    # The folder did not exist before this run (fresh_base checks it), so this run wrote the model.
    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    assert "model.keras" in hdfs.list(result["model_dir"])
    # The extra link's target: the RM page of exactly this application.
    with urllib.request.urlopen(result["tracking_url"], timeout=10) as page:
        assert app_id in page.read().decode()

    # The new model is an event on the digits model asset, saying where it is ...
    db = Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        extras = [
            json.loads(row[0])
            for row in conn.execute(
                "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = 'tony_model_digits'"
            )
        ]
    assert any(e.get("model_dir") == result["model_dir"] and e.get("application_id") == app_id for e in extras), extras
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        data_events = [
            json.loads(row[0])
            for row in conn.execute(
                "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = 'tony_data_digits'"
            )
        ]
    assert {"day": "2026-11-02", "path": partition, "files": 5, "records": 1797} in data_events, data_events
    # ... and the DAG scheduled on that asset loads it from HDFS and scores samples with it.
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
def test_modes_succeed_and_fail_alike(airflow_env, kill_dag_apps, deferrable: bool) -> None:
    kill_dag_apps += ["tony_test_ok", "tony_test_fail"]
    ok = dags_test(airflow_env, "tony_test_ok", dagfile=TEST_DAGS, deferrable=deferrable)
    assert run_state(ok) == "success", ok[-4000:]
    assert result_of(ok)["final_state"] == "SUCCEEDED"
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


def test_hparam_sweep_maps_one_application_per_rate(airflow_env, cluster, kill_dag_apps) -> None:
    """Counts the applications of its own DAG run only (by run tag): a `make demo` or another
    checkout sweeping at the same time carries other run ids."""
    kill_dag_apps.append("tony_hparam_sweep")
    before = own_runs(airflow_env)
    out = dags_test(airflow_env, "tony_hparam_sweep", timeout=900)
    assert run_state(out) == "success", out[-4000:]
    runs = {(dag, run) for dag, run in own_runs(airflow_env) - before if dag == "tony_hparam_sweep"}
    assert len(runs) == 1, runs
    apps = apps_of_runs(cluster.rm_url, runs)
    maps = sorted(t for a in apps for t in a["applicationTags"].split(",") if t.startswith("tony-map:"))
    assert maps == ["tony-map:0", "tony-map:1", "tony-map:2"]
    assert all(a["finalStatus"] == "SUCCEEDED" for a in apps)


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


def asset_extras(env: dict[str, str], asset_name: str) -> list[dict[str, Any]]:
    """The ``extra`` of every event on ``asset_name`` in this module's metadata database."""
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = ?", (asset_name,)
        ).fetchall()
    return [json.loads(row[0]) for row in rows]


def test_quality_gate_publishes_a_good_model_and_refuses_a_worse_one(
    airflow_env, cluster, kill_dag_apps, fresh_base, tmp_path: Path
) -> None:
    """Two short one-worker jobs: the first model passes (nothing published yet), the second
    reports a worse val_accuracy: not published, no asset event, failed without retries, both
    figures in the log; the OpenLineage events name the input, the model folder and the application."""
    from hdfs import InsecureClient

    kill_dag_apps.append("tony_test_gate")
    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    model_dir = f"{fresh_base}/models/gate"
    from airflow_provider_tony.yarn.client import TonyClient

    default_fs = TonyClient.from_env()._default_fs()
    eval_data = f"{fresh_base}/data/eval.txt"
    hdfs.write(eval_data, data=b"held-out\n", overwrite=True)
    lineage = tmp_path / "openlineage.jsonl"
    env = {
        **with_base_path(airflow_env, fresh_base),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "pytest",
    }
    before = own_runs(airflow_env)
    events_before = len(asset_extras(airflow_env, "tony_model_gate_test"))

    good = dags_test(
        env,
        "tony_test_gate",
        dagfile=TEST_DAGS,
        conf={"accuracy": 0.8, "model_dir": model_dir, "eval_data": f"{default_fs}{eval_data}"},
    )
    assert run_state(good) == "success", good[-4000:]
    first = result_of(good)
    assert "quality gate passed (val_accuracy: this run 0.8, published model None)" in good, good[-4000:]
    assert first["model_dir"] == model_dir
    with hdfs.read(f"{model_dir}/tony-model.json") as reader:
        published = json.loads(reader.read())
    assert published["application_id"] == first["application_id"] and published["metrics"]["val_accuracy"] == 0.8
    extras = asset_extras(airflow_env, "tony_model_gate_test")
    assert len(extras) == events_before + 1 and extras[-1]["quality_gate"]["value"] == 0.8

    bad = dags_test(
        env,
        "tony_test_gate",
        dagfile=TEST_DAGS,
        conf={"accuracy": 0.5, "model_dir": model_dir, "eval_data": f"{default_fs}{eval_data}"},
    )
    assert run_state(bad) == "failed", bad[-4000:]
    assert re.search(r"quality gate FAILED \(val_accuracy: this run 0\.5, published model 0\.8\)", bad), bad[-4000:]
    assert "QualityGateFailed" in bad, bad[-4000:]
    runs = {r for r in own_runs(airflow_env) - before if r[0] == "tony_test_gate"}
    apps = apps_of_runs(cluster.rm_url, runs)
    assert len(apps) == 2, "retries=2, yet the failed gate's run was submitted once"
    second = next(a["id"] for a in apps if a["id"] != first["application_id"])
    with hdfs.read(f"{model_dir}/tony-model.json") as reader:
        assert json.loads(reader.read())["application_id"] == first["application_id"], "the good model stays"
    assert "weights.json" in hdfs.list(f"{model_dir}.rejected-{second}"), "the worse model is kept aside"
    assert len(asset_extras(airflow_env, "tony_model_gate_test")) == events_before + 1, "no event for it"
    # The job page (from the history the AM left, with the verdict added) shows both figures.
    from airflow_provider_tony.runtime.messages import JobHistory
    from airflow_provider_tony.runtime.page import render_page

    with hdfs.read(f"{fresh_base}/history/{second}.json") as reader:
        history = JobHistory.from_json(reader.read())
    assert history.gate is not None and (history.gate.value, history.gate.previous) == (0.5, 0.8)
    page = render_page(history, refresh_s=None)
    assert 'id="quality-gate"' in page and "0.5<" in page and "0.8<" in page

    # OpenLineage (the provider's file transport): the model folder is an output of the passing
    # run only; the run facets carry the application id and the gate's verdict.
    events = [json.loads(line) for line in lineage.read_text().splitlines() if line.strip()]
    ours = [e for e in events if e.get("job", {}).get("name") == "tony_test_gate.train"]
    complete = [e for e in ours if e["eventType"] == "COMPLETE"]
    failed = [e for e in ours if e["eventType"] == "FAIL"]
    assert complete and failed, [e.get("eventType") for e in ours]
    assert any(o["name"] == model_dir for o in complete[-1]["outputs"]), complete[-1]["outputs"]
    assert {(i["namespace"], i["name"]) for i in complete[-1]["inputs"]} == {(default_fs, eval_data)}
    assert complete[-1]["run"]["facets"]["externalQuery"]["externalQueryId"] == first["application_id"]
    assert all(o["name"] != model_dir for o in failed[-1]["outputs"]), "a rejected model is not an output"
    assert failed[-1]["run"]["facets"]["tonyJob"]["qualityGate"]["passed"] is False
