"""The skein ApplicationSpec a JobSpec becomes: what each container is told."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import ARCHIVE_ALIAS, JobSpec
from airflow_provider_tony.runtime.transport import decode_spec
from airflow_provider_tony.yarn.appspec import _launch_script, build_application_spec


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
    assert "exec '/opt/py env/bin/python' -I -u -c " in app.master.script
    assert app.master.script.rstrip().endswith(f'"$PWD/{C.RUNTIME_ZIP}" airflow_provider_tony.runtime.am')
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


def test_the_am_is_given_the_runtime_but_none_of_the_jobs_files(tmp_path: Path) -> None:
    """The job's ``files``, absolute scripts and source tree go to the tasks only: the AM may hold a keytab."""
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    job = JobSpec.from_dict(
        {
            "roles": {"worker": {"script": str(script)}},
            "files": {"skein.py": "hdfs:///u/skein.py", "sitecustomize.py": "hdfs:///u/sc.py"},
        }
    )
    app = build_application_spec(job, python="/usr/bin/python3", source_archive="hdfs:///u/src.tgz")
    assert set(app.master.files) == {C.RUNTIME_ZIP}
    assert {"skein.py", "sitecustomize.py", "train.py", C.SRC_ALIAS} <= set(app.services["worker"].files)
    # An environment archive is the AM's interpreter (./environment/bin/python): it goes there too, alone.
    packed = JobSpec.from_dict({**job.to_dict(), "python": {"archive": "hdfs:///u/env.tar.gz"}})
    app = build_application_spec(packed, python=packed.python.python_command(), python_archive_source="hdfs:///u/e.tgz")
    assert set(app.master.files) == {C.RUNTIME_ZIP, ARCHIVE_ALIAS}


def test_an_am_interpreter_runs_the_am_without_the_archive() -> None:
    """``python.am_interpreter``: the AM starts with it and is given no archive; the tasks keep the archive's Python."""
    job = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "python": {"archive": "hdfs:///u/env.tar.gz", "am_interpreter": "/opt/tony/bin/python"},
            "kerberos": {"refresh_tokens": True},
        }
    )
    app = build_application_spec(job, python=job.python.python_command(), python_archive_source="hdfs:///u/e.tgz")
    assert set(app.master.files) == {C.RUNTIME_ZIP}
    assert app.master.script.splitlines()[-1].startswith("exec /opt/tony/bin/python -I ")
    assert f"exec ./{ARCHIVE_ALIAS}/bin/python -I " in app.services["worker"].script
    assert ARCHIVE_ALIAS in app.services["worker"].files


def test_the_keytab_never_shares_the_am_with_an_archives_python() -> None:
    """refresh_tokens ships the keytab to the AM; with an archive and no am_interpreter the AM would run the
    archive's packages (and any .pth file in them) beside it: refused before anything is submitted."""
    doc = {
        "roles": {"worker": {"command": ["true"]}},
        "python": {"archive": "hdfs:///u/env.tar.gz"},
        "kerberos": {"refresh_tokens": True},
    }
    with pytest.raises(SpecError, match=r"^kerberos\.refresh_tokens: .*set python\.am_interpreter"):
        JobSpec.from_dict(doc)
    JobSpec.from_dict({**doc, "python": {"interpreter": "/usr/bin/python3"}})  # a node's Python: allowed
    JobSpec.from_dict({**doc, "kerberos": {"refresh_tokens": False}})  # no keytab in the AM: allowed
    with pytest.raises(SpecError, match=r"am_interpreter: 'bin/python' is not an absolute path"):
        JobSpec.from_dict({**doc, "python": {"archive": "hdfs:///u/env.tar.gz", "am_interpreter": "bin/python"}})


@pytest.mark.parametrize("name", [C.RUNTIME_ZIP, ARCHIVE_ALIAS, C.SRC_ALIAS, C.AM_KEYTAB_ALIAS, ".skein.sh"])
def test_a_shipped_file_cannot_take_a_name_of_the_runtime(name: str) -> None:
    with pytest.raises(SpecError, match=rf"files\.{name.replace('.', '[.]')}: .*rename the shipped file"):
        JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "files": {name: "hdfs:///u/x"}})


def test_the_launch_scripts_import_nothing_from_the_working_directory_or_pythonpath(tmp_path: Path) -> None:
    """The real launch script, run by bash in a folder holding hostile job files, with them on PYTHONPATH too.

    Each hostile file leaves a marker when imported. The module run (a stand-in for
    the AM, from the runtime zip) imports ``skein`` and ``airflow_provider_tony``: it
    must get the installed skein and the zip's package, and no marker may appear.
    """
    work = tmp_path / "container"
    work.mkdir()
    for name in ("skein.py", "sitecustomize.py", "usercustomize.py", "airflow_provider_tony.py"):
        (work / name).write_text(f"open({str(tmp_path / ('ran-' + name))!r}, 'w').close()\n")
    with zipfile.ZipFile(work / C.RUNTIME_ZIP, "w") as zf:
        zf.writestr("airflow_provider_tony/__init__.py", "")
        zf.writestr(
            "airflow_provider_tony/probe.py",
            "import sys, skein, airflow_provider_tony\n"
            "print(skein.__file__)\nprint(airflow_provider_tony.__file__)\nprint(sys.argv[1:])\n",
        )
    for user_path in (False, True):
        script = work / "launch.sh"
        script.write_text(_launch_script(sys.executable, "airflow_provider_tony.probe", user_path=user_path))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(work), "HOME": str(tmp_path)}
        out = subprocess.run(["bash", str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        skein_file, package_file, argv = out.stdout.splitlines()
        assert not skein_file.startswith(str(work)), f"the job's skein.py was imported: {skein_file}"
        assert package_file.startswith(str(work / C.RUNTIME_ZIP)), package_file
        assert argv == "[]", "the boot's own arguments are not left for the module"
        assert sorted(p.name for p in tmp_path.glob("ran-*")) == [], "a job file ran in our process"
