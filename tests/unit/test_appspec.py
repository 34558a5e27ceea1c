"""The skein ApplicationSpec a JobSpec becomes: what each container is told."""

from __future__ import annotations

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.transport import decode_spec
from airflow_provider_tony.yarn.appspec import build_application_spec


def spec() -> JobSpec:
    return JobSpec.from_dict(
        {"roles": {"worker": {"instances": 2, "command": ["true"]}, "ps": {"instances": 1, "command": ["true"]}}}
    )


def test_only_the_am_jvm_gets_light_jit_options() -> None:
    app = build_application_spec(spec(), python="/usr/bin/python3")
    assert app.master.env["JAVA_TOOL_OPTIONS"] == "-XX:TieredStopAtLevel=1"
    for service in app.services.values():  # no JVM of ours there; user code may start its own
        assert "JAVA_TOOL_OPTIONS" not in service.env


def test_a_callers_java_tool_options_win() -> None:
    app = build_application_spec(spec(), python="/usr/bin/python3", extra_env={"JAVA_TOOL_OPTIONS": "-Xmx1g"})
    assert app.master.env["JAVA_TOOL_OPTIONS"] == "-Xmx1g"


def test_every_container_carries_the_same_job_spec() -> None:
    app = build_application_spec(spec(), python="/opt/py env/bin/python")
    envs = [app.master.env, *(s.env for s in app.services.values())]
    assert {e[C.ENV_JOB_SPEC] for e in envs} == {app.master.env[C.ENV_JOB_SPEC]}
    assert sorted(decode_spec(app.master.env[C.ENV_JOB_SPEC]).roles) == ["ps", "worker"]
    assert "exec '/opt/py env/bin/python' -u -m airflow_provider_tony.runtime.am" in app.master.script
    assert sorted(app.services) == ["ps", "worker"] and app.services["worker"].instances == 2


def test_the_source_archive_goes_to_the_tasks_as_src() -> None:
    job = JobSpec.from_dict({"src_dir": "/home/me/project", "roles": {"worker": {"script": "main.py"}}})
    archive = "hdfs://nn:8020/user/me/tony/src/abc.tar.gz"
    app = build_application_spec(job, python="/usr/bin/python3", source_archive=archive)
    shipped = app.services["worker"].files[C.SRC_ALIAS]
    assert shipped.source == archive and str(shipped.type).lower() == "archive"
    assert C.SRC_ALIAS not in app.master.files, "the AM runs no user code: it need not unpack the tree"
    assert decode_spec(app.services["worker"].env[C.ENV_JOB_SPEC]).src_dir == archive


def test_an_hdfs_src_dir_is_shipped_as_it_is() -> None:
    job = JobSpec.from_dict({"src_dir": "hdfs:///p/src.zip", "roles": {"worker": {"script": "main.py"}}})
    app = build_application_spec(job, python="/usr/bin/python3")
    assert app.services["worker"].files[C.SRC_ALIAS].source == "hdfs:///p/src.zip"
