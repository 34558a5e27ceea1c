"""The tony.xml converter: every TonY key either mapped (with a non-default value) or listed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_provider_tony.__main__ import main as cli
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.tony_xml import convert_tony_xml, job_from_tony_xml
from tests.unit.support.paths import REPO

XML = """<?xml version="1.0"?>
<configuration>
  <property><name>tony.application.name</name><value>mnist-distributed</value></property>
  <property><name>tony.yarn.queue</name><value>ml</value></property>
  <property><name>tony.application.tags</name><value>team-a, nightly</value></property>
  <property><name>tony.application.timeout</name><value>3600000</value></property>
  <property><name>tony.am.startup-timeout</name><value>120000</value></property>
  <property><name>tony.task.executor.registry-timeout-sec</name><value>90</value></property>
  <property><name>tony.task.heartbeat-interval-ms</name><value>2000</value></property>
  <property><name>tony.task.max-missed-heartbeats</name><value>10</value></property>
  <property><name>tony.am.memory</name><value>1g</value></property>
  <property><name>tony.am.vcores</name><value>2</value></property>
  <property><name>tony.worker.instances</name><value>4</value></property>
  <property><name>tony.worker.memory</name><value>4g</value></property>
  <property><name>tony.worker.vcores</name><value>2</value></property>
  <property><name>tony.worker.gpus</name><value>1</value></property>
  <property><name>tony.worker.node-label</name><value>gpu</value></property>
  <property><name>tony.ps.instances</name><value>1</value></property>
  <property><name>tony.ps.memory</name><value>3072</value></property>
  <property><name>tony.ps.command</name><value>python -m trainer.ps --port 0</value></property>
  <property><name>tony.evaluator.instances</name><value>0</value></property>
  <property><name>tony.worker.depends-on</name><value>ps</value></property>
  <property><name>tony.application.untracked.jobtypes</name><value>ps</value></property>
  <property><name>tony.application.stop-on-failure-jobtypes</name><value>ps,tensorboard</value></property>
  <property><name>tony.containers.envs</name><value>A=1,B=two=2</value></property>
  <property><name>tony.execution.envs</name><value>C=3</value></property>
  <property><name>tony.containers.resources</name><value>/data/vocab.txt,hdfs:///x/y.zip#archive</value></property>
  <property><name>tony.docker.enabled</name><value>true</value></property>
  <property><name>tony.docker.containers.image</name><value>tf:2</value></property>
  <property><name>tony.application.distributed-mode</name><value>FCFS</value></property>
  <property><name>tony.made.up</name><value>1</value></property>
</configuration>
"""


@pytest.fixture
def xml(tmp_path: Path) -> Path:
    path = tmp_path / "tony.xml"
    path.write_text(XML)
    return path


def test_every_mapped_key(xml: Path, tmp_path: Path) -> None:
    job, _ = convert_tony_xml(
        xml,
        executes="mnist.py",
        task_params="--steps 100 --lr 0.1",
        src_dir=str(tmp_path),
        python_binary_path="/opt/py/bin/python3",
    )
    assert job["name"] == "mnist-distributed" and job["queue"] == "ml" and job["tags"] == ["team-a", "nightly"]
    assert job["deadline"] == 3600 and job["startup_timeout"] == 120 and job["registration_timeout"] == 90
    assert job["heartbeat_interval"] == 2 and job["heartbeat_timeout"] == 20
    assert job["am_memory"] == "1g" and job["am_vcores"] == 2
    assert job["roles"]["worker"] == {
        "instances": 4,
        "memory": "4g",
        "vcores": 2,
        "gpus": 1,
        "node_label": "gpu",
        "script": "mnist.py",
        "args": ["--steps", "100", "--lr", "0.1"],
    }
    assert job["roles"]["ps"] == {
        "instances": 1,
        "memory": 3072,
        "vcores": 1,
        "gpus": 0,
        "module": "trainer.ps",
        "args": ["--port", "0"],
    }
    assert "evaluator" not in job["roles"], "TonY skips a job type with 0 instances"
    assert job["untracked_roles"] == ["ps", "tensorboard"]
    assert job["env"] == {"A": "1", "B": "two=2", "C": "3"}
    assert job["files"] == {"vocab.txt": "/data/vocab.txt"}
    assert job["src_dir"] == str(tmp_path) and job["python"] == {"interpreter": "/opt/py/bin/python3"}
    spec = JobSpec.from_dict(job)  # what came out is a valid job
    assert spec.roles["worker"].memory == 4096


def test_unmapped_keys_are_listed_with_a_reason(xml: Path) -> None:
    _, unmapped = convert_tony_xml(xml, executes="mnist.py")
    why = dict(unmapped)
    assert "Docker" in why["tony.docker.enabled"] and "Docker" in why["tony.docker.containers.image"]
    assert "GANG" in why["tony.application.distributed-mode"]
    assert "GANG" in why["tony.worker.depends-on"]
    assert "archive" in why["tony.containers.resources"]
    assert "tensorboard" in why["tony.application.stop-on-failure-jobtypes"]
    assert why["tony.made.up"] == "not a TonY key this converter knows"
    assert not {"tony.worker.memory", "tony.application.name", "tony.containers.envs"} & set(why)


def test_commands_become_argument_lists_not_shell_strings(tmp_path: Path) -> None:
    path = tmp_path / "t.xml"
    path.write_text(
        "<configuration><property><name>tony.worker.instances</name><value>1</value></property>"
        '<property><name>tony.worker.command</name><value>./run.sh "a b" c</value></property>'
        "</configuration>"
    )
    job, _ = convert_tony_xml(path)
    assert job["roles"]["worker"]["command"] == ["./run.sh", "a b", "c"]


def test_python_venv_becomes_the_archive(xml: Path, tmp_path: Path) -> None:
    job, unmapped = convert_tony_xml(
        xml, executes="mnist.py", python_venv=str(tmp_path / "venv.zip"), python_binary_path="Python/bin/python"
    )
    assert job["python"] == {"archive": str(tmp_path / "venv.zip")}
    assert "bin/python at its root" in dict(unmapped)["--python_binary_path"]


def test_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"tony_xml: .*could not be read as a Hadoop configuration file"):
        job_from_tony_xml(tmp_path / "missing.xml")


def test_cli_writes_yaml_and_lists_the_rest(xml: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "job.yaml"
    assert cli(["convert", str(xml), "-o", str(out), "--executes", "mnist.py"]) == 0
    text = out.read_text()
    assert text.startswith("# Converted from a TonY configuration.\n# Not converted:\n")
    assert yaml.safe_load(text)["roles"]["worker"]["script"] == "mnist.py"
    assert "not converted: tony.docker.enabled: Docker" in capsys.readouterr().err


def test_cli_says_when_the_job_is_not_complete(xml: Path, tmp_path: Path, capsys) -> None:
    """Without --executes (and no tony.<jobtype>.command) the roles have no program yet."""
    assert cli(["convert", str(xml), "-o", str(tmp_path / "job.yaml")]) == 1
    assert "not complete yet: roles.worker.command: no program given" in capsys.readouterr().err


def test_a_property_name_with_a_newline_injects_nothing(tmp_path: Path, capsys) -> None:
    """Someone else's tony.xml names a property ``x\\nfiles:\\n  id_rsa: ...``: before the fix the
    comment line ended at the newline and the converted job shipped ~/.ssh/id_rsa."""
    evil = "tony.made.up\nfiles:\n  id_rsa: /root/.ssh/id_rsa\nenv:\n  LD_PRELOAD: /tmp/x.so\n#"
    path = tmp_path / "tony.xml"
    path.write_text(
        '<?xml version="1.0"?><configuration>'
        "<property><name>tony.worker.instances</name><value>1</value></property>"
        f"<property><name>{evil}</name><value>1\r\nenv: {{}}</value></property>"
        "</configuration>"
    )
    out = tmp_path / "job.yaml"
    assert cli(["convert", str(path), "-o", str(out), "--executes", "mnist.py"]) == 0
    text = out.read_text()
    job = yaml.safe_load(text)
    assert "files" not in job and "env" not in job, text
    assert "tony.made.up\\nfiles:" in text, "the name is still shown, escaped, for the person to see"
    err = capsys.readouterr().err
    assert "\nfiles:" not in err and "id_rsa" in err


# One sample per rule of the converter's tables: the value written to tony.xml and what the JobSpec
# field must then hold (None: the key must be listed as not converted). A rule added to a table
# without a sample here fails the first assertion below.
JOB_SAMPLES: dict[str, tuple[str, object]] = {
    "tony.application.name": ("n1", "n1"),
    "tony.yarn.queue": ("q1", "q1"),
    "tony.application.tags": ("a,b", ["a", "b"]),
    "tony.application.timeout": ("90000", 90),
    "tony.am.startup-timeout": ("7000", 7),
    "tony.task.executor.registry-timeout-sec": ("33", 33),
    "tony.am.memory": ("700", 700),
    "tony.am.vcores": ("3", 3),
    "tony.am.gpus": ("1", None),
    "tony.application.node-label": ("big", None),
    "tony.application.framework": ("PyTorch", "pytorch"),
    "tony.application.distributed-mode": ("FCFS", None),
    "tony.application.fail-on-worker-failure-enabled": ("false", None),
    "tony.other.namenodes": ("hdfs://nn2:8020, hdfs://ns3", ["hdfs://nn2:8020", "hdfs://ns3"]),
}
ROLE_SAMPLES: dict[str, tuple[str, object]] = {
    "memory": ("5g", "5g"),
    "vcores": ("3", 3),
    "gpus": ("2", 2),
    "node-label": ("gpu", "gpu"),
    "max-instances": ("9", None),
    "depends-on": ("ps", None),
    "placement-spec": ("x", None),
    "allocation-tags": ("x", None),
    "jvm.opts": ("-Xmx1g", None),
}


def test_every_table_rule_is_exercised(tmp_path: Path) -> None:
    from airflow_provider_tony import tony_xml

    job_rules = (*tony_xml.JOB_RULES, *tony_xml.JOB_RULES_AFTER_HEARTBEAT)
    assert {r.key for r in job_rules} == set(JOB_SAMPLES)
    assert {r.key for r in tony_xml.ROLE_RULES} == set(ROLE_SAMPLES)
    props = {key: value for key, (value, _) in JOB_SAMPLES.items()}
    props.update({f"tony.worker.{attr}": value for attr, (value, _) in ROLE_SAMPLES.items()})
    props["tony.worker.instances"] = "2"
    path = tmp_path / "tony.xml"
    path.write_text(
        "<configuration>"
        + "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
        + "</configuration>"
    )
    job, unmapped = convert_tony_xml(path, executes="train.py")
    why = dict(unmapped)
    for rules, samples, target, prefix in (
        (job_rules, JOB_SAMPLES, job, ""),
        (tony_xml.ROLE_RULES, ROLE_SAMPLES, job["roles"]["worker"], "tony.worker."),
    ):
        for rule in rules:
            value, expected = samples[rule.key]
            key = prefix + rule.key
            if expected is None:
                assert rule.field is None and why[key] == rule.reason.format(value=value), key
            else:
                assert rule.field is not None and target[rule.field] == expected, key
                assert key not in why, key
    # Nothing else was left over: every sample key was read by its rule.
    assert set(why) == {k for k, (_, e) in JOB_SAMPLES.items() if e is None} | {
        f"tony.worker.{a}" for a, (_, e) in ROLE_SAMPLES.items() if e is None
    }


def test_other_namenodes_become_the_jobs_other_namenodes(tmp_path: Path) -> None:
    """TonY's ``tony.other.namenodes`` (comma-separated URIs) is the JobSpec's ``other_namenodes``, checked as such."""
    path = tmp_path / "tony.xml"
    path.write_text(
        "<configuration><property><name>tony.other.namenodes</name>"
        "<value>hdfs://NN2.example:8020,hdfs://warehouse/</value></property>"
        "<property><name>tony.worker.instances</name><value>1</value></property></configuration>"
    )
    job, unmapped = convert_tony_xml(path, executes="train.py")
    assert "tony.other.namenodes" not in dict(unmapped)
    assert JobSpec.from_dict(job).other_namenodes == ["hdfs://nn2.example:8020", "hdfs://warehouse"]


def test_the_pytorch_projects_tony_xml_converts_to_a_pytorch_job_of_two_workers() -> None:
    """The tony.xml in TonY's PyTorch shape (tests/integration/jobs/tony_torch_project, which
    test_projects.py runs on the cluster): framework, two workers, every key mapped."""
    project = REPO / "tests" / "integration" / "jobs" / "tony_torch_project"
    job, unmapped = convert_tony_xml(project / "tony.xml", executes="train_ddp.py", src_dir=str(project))
    assert unmapped == []
    spec = JobSpec.from_dict(job)
    assert spec.framework == "pytorch" and set(spec.roles) == {"worker"}
    assert spec.roles["worker"].instances == 2 and spec.roles["worker"].script == "train_ddp.py"
