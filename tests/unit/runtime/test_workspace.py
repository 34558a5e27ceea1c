"""How the executor lays out a task: import path, argv, source links, TonY's variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import workspace
from airflow_provider_tony.runtime.executor import user_environment
from airflow_provider_tony.runtime.messages import ClusterDocument
from airflow_provider_tony.runtime.spec import JobSpec, RoleSpec

CLUSTER = {
    "addresses": {"worker:1": "h2:2", "worker:0": "h1:1", "ps:0": "h3:3", "tensorboard:0": "h4:4"},
    "num_tasks": {"worker": 2, "ps": 1, "tensorboard": 1},
}


def test_script_runs_with_its_named_folder_first_on_sys_path(tmp_path: Path) -> None:
    """YARN's layout: main.py is a link into a cache folder of its own; helper.py another."""
    cache = tmp_path / "filecache"
    (cache / "1").mkdir(parents=True)
    (cache / "2").mkdir()
    (cache / "1" / "main.py").write_text("import sys, helper\nprint(sys.path[0], helper.VALUE, sys.argv[1:])\n")
    (cache / "2" / "helper.py").write_text("VALUE = 42\n")
    work = tmp_path / "container"
    work.mkdir()
    (work / "main.py").symlink_to(cache / "1" / "main.py")
    (work / "helper.py").symlink_to(cache / "2" / "helper.py")
    argv = workspace.task_argv(RoleSpec(script="main.py", args=["--x", "1"]), sys.executable)
    env = {**os.environ, "PYTHONPATH": workspace.python_path(work, False, None, None)}
    out = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(work), "42", "['--x',", "'1']"]
    plain = subprocess.run(
        [sys.executable, "main.py"],
        check=False,
        cwd=work,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
    )
    assert "No module named 'helper'" in plain.stderr, "the layout no longer reproduces the bug this fixes"


def test_module_and_command_roles_are_unchanged() -> None:
    assert workspace.task_argv(RoleSpec(module="trainer.main", args=["a"]), "/py") == [
        "/py",
        "-u",
        "-m",
        "trainer.main",
        "a",
    ]
    assert workspace.task_argv(RoleSpec(command=["bash", "x.sh"]), "/py") == ["bash", "x.sh"]


def test_python_path_puts_ours_first_and_keeps_the_users(tmp_path: Path) -> None:
    got = workspace.python_path(tmp_path, True, "/user/lib:/shared", f"{tmp_path}/tony_runtime.zip")
    assert got.split(":") == [f"{tmp_path}/src", str(tmp_path), "/user/lib", "/shared", f"{tmp_path}/tony_runtime.zip"]


def test_source_entries_are_linked_unless_the_name_is_taken(tmp_path: Path) -> None:
    src = tmp_path / "cache"
    (src / "pkg").mkdir(parents=True)
    (src / "main.py").write_text("")
    (src / "model").mkdir()
    (src / "launch_container.sh").write_text("")
    work = tmp_path / "work"
    work.mkdir()
    (work / "launch_container.sh").write_text("yarn's")
    skipped = workspace.link_source(src, work, reserved={"model"})
    assert skipped == ["launch_container.sh", "model"]
    assert (work / "pkg").resolve() == (src / "pkg").resolve() and (work / "main.py").is_symlink()
    assert (work / "launch_container.sh").read_text() == "yarn's"


def test_tony_variables() -> None:
    env = workspace.tony_env("worker", 1, CLUSTER["addresses"], 2, False, "application_1_0001", 5555)
    assert (
        env[C.ENV_TONY_JOB_NAME] == "worker" and env[C.ENV_TONY_TASK_INDEX] == "1" and env[C.ENV_TONY_TASK_NUM] == "2"
    )
    assert json.loads(env[C.ENV_TONY_CLUSTER_SPEC]) == {
        "worker": ["h1:1", "h2:2"],
        "ps": ["h3:3"],
        "tensorboard": ["h4:4"],
    }
    assert env[C.ENV_TONY_JOB_ID] == "application_1_0001" and C.ENV_TONY_IS_CHIEF not in env
    assert C.ENV_TONY_TB_PORT not in env
    tb = workspace.tony_env("tensorboard", 0, CLUSTER["addresses"], 2, False, "a", 5555)
    assert tb[C.ENV_TONY_TB_PORT] == "5555"
    assert workspace.tony_env("worker", 0, CLUSTER["addresses"], 2, True, "a", 1)[C.ENV_TONY_IS_CHIEF] == "true"


def test_user_environment_carries_tony_variables_and_the_users_wins(tmp_path: Path) -> None:
    spec = JobSpec.from_dict(
        {
            "roles": {
                "worker": {"instances": 2, "script": "main.py"},
                "ps": {"script": "main.py"},
                "tensorboard": {"script": "tb.py"},
            },
            "env": {"JOB_NAME": "mine", "PYTHONPATH": "/user/lib"},
        }
    )
    env = user_environment(
        spec, "worker", 0, ClusterDocument.from_dict(CLUSTER), "app", tmp_path, {"PYTHONPATH": "rt.zip"}, port=7
    )
    assert env["JOB_NAME"] == "mine"
    assert env["TASK_NUM"] == "2", "ps and tensorboard are untracked: TonY counts tracked tasks"
    assert env["IS_CHIEF"] == "true"
    assert env["PYTHONPATH"].split(":") == [str(tmp_path), "/user/lib", "rt.zip"]


def test_a_pytorch_job_gets_the_rendezvous_and_no_tf_config(tmp_path: Path) -> None:
    """The executor asks the job's framework for the rendezvous: torchrun's variables, not TF_CONFIG."""
    cluster = ClusterDocument.from_dict(
        {**CLUSTER, "addresses": {"worker:0": "h1:1", "worker:1": "h2:2", "tensorboard:0": "h4:4"}}
    )
    spec = JobSpec.from_dict(
        {
            "framework": "pytorch",
            "roles": {"worker": {"instances": 2, "script": "main.py"}, "tensorboard": {"script": "tb.py"}},
        }
    )
    env = user_environment(spec, "worker", 1, cluster, "app", tmp_path, {"TF_CONFIG": "stale"}, port=2)
    assert "TF_CONFIG" not in env
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == ("h1", "1", "1", "2")
    tb = user_environment(spec, "tensorboard", 0, cluster, "app", tmp_path, {}, port=4)
    assert "RANK" not in tb and "TF_CONFIG" not in tb
