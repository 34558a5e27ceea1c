"""`devcluster/airflow_stack.py` finds the venv's ``airflow`` the way `make airflow-up` calls it.

The Makefile passes ``--python .venv/bin/python`` (relative), and the services
start with their working directory in the stack's home: a relative path to
``airflow`` broke there. A venv's python is a symlink to the base interpreter,
so the path must be made absolute without following it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.support.paths import REPO


def _stack() -> ModuleType:
    """Load the script as a module, leaving ``sys.path``/``sys.modules`` as they were (it adds its folder)."""
    path, had_devcluster = list(sys.path), "devcluster" in sys.modules
    spec = importlib.util.spec_from_file_location("tony_airflow_stack", REPO / "devcluster" / "airflow_stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
        if not had_devcluster:
            sys.modules.pop("devcluster", None)
    return module


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A venv's shape: ``bin/python`` a symlink to an interpreter elsewhere, ``bin/airflow`` beside it."""
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "python3").write_text("#!/bin/sh\n")
    (base / "python3").chmod(0o755)
    bin_dir = tmp_path / "checkout" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(base / "python3")
    (bin_dir / "airflow").write_text("#!/bin/sh\n")
    (bin_dir / "airflow").chmod(0o755)
    return bin_dir.parent


def test_relative_python_gives_absolute_airflow_inside_the_venv(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(venv.parent)
    airflow = _stack().airflow_beside(".venv/bin/python")
    assert os.path.isabs(airflow)
    assert airflow == str(venv / "bin" / "airflow")  # beside the symlink, not beside its target
    monkeypatch.chdir(venv.parent.parent)  # the services run elsewhere: the path must still name it
    assert os.access(airflow, os.X_OK)


def test_python_without_airflow_beside_it_is_a_clear_error(venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = _stack()
    (venv / "bin" / "airflow").unlink()
    monkeypatch.chdir(venv.parent)
    with pytest.raises(stack.StackError, match=r"'\.venv/bin/python'.*no airflow script beside it"):
        stack.airflow_beside(".venv/bin/python")


def test_without_java_hides_the_jdk_and_trips_on_a_java_call(tmp_path: Path) -> None:
    """Airflow starts with no JDK visible; a java launched anyway is recorded (and fails)."""
    import subprocess

    stack = _stack()
    jdk_bin = tmp_path / "jdk" / "bin"
    jdk_bin.mkdir(parents=True)
    (jdk_bin / "java").write_text("#!/bin/sh\nexit 0\n")
    (jdk_bin / "java").chmod(0o755)
    env = {"PATH": f"{jdk_bin}:/usr/bin:/bin", "JAVA_HOME": str(tmp_path / "jdk"), "HOME": str(tmp_path)}
    hidden = stack.without_java(env, tmp_path / "no-java")
    folders = hidden["PATH"].split(":")
    assert "JAVA_HOME" not in hidden and str(jdk_bin) not in folders and "/usr/bin" in folders
    assert folders[0] == str(tmp_path / "no-java")  # the tripwire shadows /usr/bin/java
    assert stack.java_calls(tmp_path / "no-java") == ""
    ran = subprocess.run(["java", "-version"], env=hidden, capture_output=True)
    assert ran.returncode == 127
    assert "-version" in stack.java_calls(tmp_path / "no-java")
