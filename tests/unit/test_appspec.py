"""The skein ApplicationSpec a JobSpec becomes: what each container is told."""
from __future__ import annotations

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.transport import decode_spec
from airflow_provider_tony.yarn.appspec import build_application_spec


def spec() -> JobSpec:
    return JobSpec.from_dict({"roles": {"worker": {"instances": 2, "command": ["true"]},
                                        "ps": {"instances": 1, "command": ["true"]}}})


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
