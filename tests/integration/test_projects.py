"""Training projects on the real cluster: sibling modules through ``files``, a ``src_dir``
(from the CLI and from the operator), content-hash reuse, and a TonY job converted from
its ``tony.xml`` running a TonY-style script unchanged (TensorFlow, and PyTorch meeting through
TonY's ``INIT_METHOD``/``RANK``/``WORLD``).

Only the TonY job and the ``files`` job run TensorFlow (they prove that a tutorial-like
``main.py`` finds its sibling and that TonY's ``CLUSTER_SPEC`` forms a working cluster);
the others run a small script.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import yaml

from airflow_provider_tony.cli import load_job
from airflow_provider_tony.cli import main as cli
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn import source as src
from tests._airflow import (
    dags_test,
    result_of,
    run_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOBS = Path(__file__).parent / "jobs"
TONY_PROJECT = JOBS / "tony_project"
TONY_TORCH_PROJECT = JOBS / "tony_torch_project"
SRC_PROJECT = JOBS / "src_project"
BEAT = {"heartbeat_interval": 1, "heartbeat_timeout": 60, "registration_timeout": 300}


def _write_yaml(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _src_copy(tmp_path: Path) -> Path:
    """The source project plus a file its .tonyignore leaves out."""
    project = tmp_path / "src_project"
    shutil.copytree(SRC_PROJECT, project)
    (project / "scratch.bin").write_bytes(b"\0" * 1024)
    return project


def test_sibling_module_through_files_from_the_cli(tmp_path: Path, app_tag: str, capsys) -> None:
    """The tutorial layout: ``main.py`` imports ``digits_setup`` shipped beside it in ``files``."""
    for name in ("main.py", "digits_setup.py"):
        shutil.copy(TONY_PROJECT / name, tmp_path / name)
    job = _write_yaml(
        tmp_path / "job.yaml",
        {
            "name": "pytest-files-project",
            "python": {"interpreter": sys.executable},
            "files": {"digits_setup.py": str(tmp_path / "digits_setup.py")},
            "roles": {"worker": {"instances": 1, "memory": "1 GiB", "script": "main.py", "args": ["--steps", "3"]}},
            **BEAT,
        },
    )
    code = cli(["submit", str(job), "--tag", app_tag, "--poll-interval", "0.5"])
    out = capsys.readouterr()
    assert code == 0, out.out[-3000:] + out.err[-3000:]


def test_src_dir_from_the_cli_and_reused_on_a_second_submit(tmp_path: Path, app_tag: str, tony_client, capsys) -> None:
    """The first submit uploads the tree, the next finds it by its hash. The tree carries a file of
    this run's own, so an archive an earlier run left on HDFS cannot make "not uploaded again" true
    by itself."""
    project = _src_copy(tmp_path)
    (project / "this_run.txt").write_text(uuid.uuid4().hex)
    hdfs = tony_client.hdfs()
    archive = f"{tony_client.base_path}/src/{src.scan(project).digest()[:24]}.tar.gz"
    assert hdfs.status(archive, strict=False) is None, "a fresh tree's archive is on HDFS before any submit"
    job = _write_yaml(
        tmp_path / "job.yaml",
        {
            "name": "pytest-src-dir",
            "python": {"interpreter": sys.executable},
            "src_dir": "src_project",
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 20,
            "roles": {
                "worker": {
                    "instances": 2,
                    "memory": "256 MiB",
                    "script": "main.py",
                    "args": ["hello from the source tree"],
                }
            },
        },
    )
    code = cli(["submit", str(job), "--tag", app_tag, "--poll-interval", "0.5"])
    out = capsys.readouterr()
    assert code == 0, out.out[-3000:] + out.err[-3000:]

    try:
        before = hdfs.status(archive, strict=False)
        assert before is not None, f"the submit did not upload the source tree to {archive}"
        # The same tree again: found on HDFS by its content hash, nothing packed or uploaded.
        staged = tony_client.stage_source(str(project))
        assert staged.url.endswith(archive)
        assert not staged.uploaded and staged.pack_s == 0 and staged.upload_s == 0
        assert hdfs.status(archive)["modificationTime"] == before["modificationTime"], "uploaded again"
        # ...and a changed tree is a new archive.
        (project / "pkg" / "util.py").write_text("def greeting(name):\n    return 'changed'\n")
        changed = tony_client.stage_source(str(project))
        assert changed.uploaded and changed.url != staged.url
    finally:
        for digest in {src.scan(project).digest()[:24], archive.rsplit("/", 1)[1][:24]}:
            hdfs.delete(f"{tony_client.base_path}/src/{digest}.tar.gz")


def test_src_dir_from_the_operator(tmp_path: Path, airflow_env, kill_dag_apps) -> None:
    """A DAG whose job names ``src_dir`` relative to the DAG file."""
    dags = tmp_path / "dags"
    dags.mkdir()
    _src_copy(dags)
    dag_id = "pytest_src_dir_operator"
    kill_dag_apps.append(dag_id)
    dagfile = dags / "src_dir_dag.py"
    dagfile.write_text(
        textwrap.dedent(f"""
        import sys
        import pendulum
        from airflow.sdk import DAG
        from airflow_provider_tony.operators.tony import TonyOperator

        with DAG({dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False):
            TonyOperator(task_id="train", poll_interval=1, job={{
                "src_dir": "src_project", "python": {{"interpreter": sys.executable}},
                "heartbeat_interval": 0.5, "heartbeat_timeout": 20,
                "roles": {{"worker": {{"instances": 1, "memory": "256 MiB", "script": "main.py",
                                       "args": ["hello from the source tree"]}}}},
            }})
    """)
    )
    out = dags_test(airflow_env, dag_id, dagfile=dagfile)
    assert run_state(out) == "success", out[-4000:]
    metrics = result_of(out)["metrics"]
    assert metrics["greeting"] == "hello from the source tree"
    assert metrics["ignored_shipped"] is False, "a file named in .tonyignore was shipped"
    # The script ran in its container's own working directory, with the tree's entries linked in.
    assert metrics["cwd"] == metrics["sys_path0"], metrics
    assert "/src" not in metrics["cwd"], metrics


TONY_XML = """<?xml version="1.0"?>
<configuration>
  <property><name>tony.application.name</name><value>pytest-from-tony</value></property>
  <property><name>tony.yarn.queue</name><value>default</value></property>
  <property><name>tony.application.tags</name><value>from-tony</value></property>
  <property><name>tony.worker.instances</name><value>2</value></property>
  <property><name>tony.worker.memory</name><value>1g</value></property>
  <property><name>tony.worker.vcores</name><value>1</value></property>
  <property><name>tony.ps.instances</name><value>0</value></property>
  <property><name>tony.am.memory</name><value>512m</value></property>
  <property><name>tony.task.heartbeat-interval-ms</name><value>1000</value></property>
  <property><name>tony.task.max-missed-heartbeats</name><value>60</value></property>
  <property><name>tony.containers.envs</name><value>GREETING=hi from tony.xml,BEAT=1</value></property>
  <property><name>tony.docker.enabled</name><value>false</value></property>
</configuration>
"""


def test_tony_xml_converted_and_run(tmp_path: Path, app_tag: str, tony_client, capsys) -> None:
    xml = tmp_path / "tony.xml"
    xml.write_text(TONY_XML)
    job_yaml = tmp_path / "job.yaml"
    assert (
        cli(
            [
                "convert",
                str(xml),
                "-o",
                str(job_yaml),
                "--executes",
                "main.py",
                "--task_params",
                "--steps 3",
                "--src_dir",
                str(TONY_PROJECT),
                "--python_binary_path",
                sys.executable,
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "tony.docker.enabled" in err, err  # listed as not converted, with its reason
    spec = JobSpec.from_yaml(job_yaml.read_text())
    assert spec.roles["worker"].script == "main.py" and spec.roles["worker"].args == ["--steps", "3"]
    assert "ps" not in spec.roles and spec.tags == ["from-tony"] and spec.heartbeat_timeout == 60

    # Both workers' final reports reach the AM in their exit records (the script exits right after
    # reporting, no heartbeat has to carry it): under TonY's chief-decides policy worker:1 could be
    # stopped before its record lands, so this run waits for every worker's instead.
    both = dataclasses.replace(load_job(str(job_yaml)), success_policy="all_workers")
    result = tony_client.wait(tony_client.submit(both, extra_tags=[app_tag]), poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    metrics = [result.am_state.task(f"worker:{i}").progress.metrics for i in (0, 1)]
    assert [m["task_index"] for m in metrics] == ["0", "1"]
    assert all(m["num_replicas"] == 2 and m["job_name"] == "worker" and m["task_num"] == "2" for m in metrics)
    assert [m["is_chief"] for m in metrics] == ["true", ""]
    assert metrics[0]["greeting"] == "hi from tony.xml"


def test_tony_pytorch_project_converted_and_run(tmp_path: Path, app_tag: str, tony_client, capsys) -> None:
    """TonY's PyTorch example shape: a ``tony.xml`` with ``tony.application.framework=pytorch`` and
    two workers, and a script whose process group meets through ``INIT_METHOD``, ``RANK`` and
    ``WORLD``, converted by ``tony convert`` and run unchanged: both ranks report world 2, an
    all-reduce of ``rank + 1`` that only two ranks that met can make 3, and the same parameters
    (DDP trained one model)."""
    job_yaml = tmp_path / "job.yaml"
    code = cli(
        [
            "convert",
            str(TONY_TORCH_PROJECT / "tony.xml"),
            "-o",
            str(job_yaml),
            "--executes",
            "train_ddp.py",
            "--task_params",
            "--steps 10",
            "--src_dir",
            str(TONY_TORCH_PROJECT),
            "--python_binary_path",
            sys.executable,
        ]
    )
    assert code == 0, capsys.readouterr().err
    spec = load_job(str(job_yaml))
    assert spec.framework == "pytorch" and spec.roles["worker"].instances == 2
    # Both ranks' reports, not only the decider's: worker:1 is not stopped before its record lands.
    both = dataclasses.replace(spec, success_policy="all_workers")
    result = tony_client.wait(tony_client.submit(both, extra_tags=[app_tag]), poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    metrics = [result.am_state.task(f"worker:{i}").progress.metrics for i in (0, 1)]
    assert [m["rank"] for m in metrics] == [0, 1] and {m["world"] for m in metrics} == {2}, metrics
    assert {m["all_reduce"] for m in metrics} == {3.0}, metrics
    assert metrics[0]["params"] == metrics[1]["params"], metrics
    assert metrics[0]["init_method"] == metrics[1]["init_method"] and metrics[0]["init_method"].startswith("tcp://")
