"""The hostile training script through Airflow (issue 27's acceptance), polling and deferrable.

``airflow dags test`` runs the real operator (and, deferred, the real
trigger) against the local cluster: the application must end (finished, or
killed), the XCom stay under 64 KiB, and the script's escapes and group
markers reach the task log only escaped, one line per event.
"""

from __future__ import annotations

import json

import pytest

from tests._airflow import (
    TEST_DAGS,
    dag_tag,
    dags_test,
    result_of,
    run_state,
)
from tests._util import rm_apps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.parametrize("deferrable", [False, True], ids=["polling", "deferrable"])
def test_a_hostile_script_through_airflow(airflow_env, cluster, kill_dag_apps, deferrable: bool) -> None:
    kill_dag_apps.append("tony_test_hostile")
    before = {a["id"] for a in rm_apps(cluster.rm_url, tag=dag_tag("tony_test_hostile"))}
    out = dags_test(airflow_env, "tony_test_hostile", dagfile=TEST_DAGS, deferrable=deferrable)
    assert run_state(out) == "success", out[-4000:]
    result = result_of(out)
    assert result["final_state"] == "SUCCEEDED"
    assert len(json.dumps(result)) < 64 * 1024
    apps = [a for a in rm_apps(cluster.rm_url, tag=dag_tag("tony_test_hostile")) if a["id"] not in before]
    assert apps and all(a["state"] in ("FINISHED", "KILLED", "FAILED") for a in apps), apps
    # The script's step-7 note holds ESC ] 0;pwned BEL and ::group:: markers: shown escaped, never raw.
    assert "]0;pwned" in out, "the note reached the task log"
    assert "\x1b]0;pwned" not in out and "\x07" not in out
    assert "::group::forged" not in out and ": :group::forged" in out
    assert "\u2028" not in out


#: The review's kind of param (issue 35, point 3): closes the quote and list it lands in, then adds keys
#: (what it did when the job file was rendered as text and then parsed).
HOSTILE_LABEL = (
    "x\"]\nqueue: production\nfiles: {skein.py: 'hdfs:///user/mallory/skein.py'}\n"
    "python: {archive: 'hdfs:///user/mallory/env.tar.gz'}\nkerberos: {refresh_tokens: true}\n"
    "env: {PYTHONPATH: /tmp}\n#"
)


def test_a_yaml_param_in_a_job_file_is_one_argument(airflow_env, cluster, kill_dag_apps) -> None:
    """A real DAG run of a job file with the hostile param in ``args``: one literal argument, no key changed."""
    kill_dag_apps.append("tony_test_param_yaml")
    before = {a["id"] for a in rm_apps(cluster.rm_url, tag=dag_tag("tony_test_param_yaml"))}
    conf = {"label": HOSTILE_LABEL, "tag": "b", "workers": "1"}
    out = dags_test(airflow_env, "tony_test_param_yaml", dagfile=TEST_DAGS, conf=conf)
    assert run_state(out) == "success", out[-4000:]
    result = result_of(out)
    assert result["final_state"] == "SUCCEEDED"
    # The job's own echo of its argv: the param arrived whole, as the value it was put in.
    assert json.loads(result["metrics"]["argv"]) == ["--label", HOSTILE_LABEL]
    assert result["metrics"]["skein_py"] == "False" and result["metrics"]["archive"] == "False"
    apps = [a for a in rm_apps(cluster.rm_url, tag=dag_tag("tony_test_param_yaml")) if a["id"] not in before]
    assert len(apps) == 1, apps
    assert apps[0]["queue"] in ("default", "root.default") and apps[0]["name"] == "param-job-b", apps[0]
