"""The distribution's metadata says what the code does: its imports, its version, its license."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

import airflow_provider_tony
from tests.unit.support.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# Distribution name -> the top-level module it provides.
IMPORT_NAME = {
    "apache-airflow": "airflow",
    "PyYAML": "yaml",
    "skein": "skein",
    "hdfs": "hdfs",
    "requests": "requests",
    "httpx": "httpx",
    "jinja2": "jinja2",
    "fastapi": "fastapi",
    "gssapi": "gssapi",
    "requests-gssapi": "requests_gssapi",
    "apache-airflow-providers-openlineage": "airflow",
    "openlineage-python": "openlineage",
    "attrs": "attr",
}
# Optional features: their imports are lazy, and their packages are an extra, not a dependency.
FEATURE_EXTRAS = ("kerberos", "openlineage")
# Imported only inside containers, from the job's own Python environment (the
# tensorboard role, the Keras progress callback): the job's requirements, not ours.
JOB_ENVIRONMENT = {"tensorboard", "tf_keras"}


def _third_party_imports() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "airflow_provider_tony").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"__future__", "airflow_provider_tony"}


def _names(deps: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ ;\[]", dep, maxsplit=1)[0] for dep in deps}


def test_dependencies_are_exactly_what_the_code_imports() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared = _names(PYPROJECT["project"]["dependencies"])
    declared |= {name for extra in FEATURE_EXTRAS for name in _names(extras[extra])}
    unknown = declared - IMPORT_NAME.keys()
    assert not unknown, f"add {unknown} to IMPORT_NAME or drop them from dependencies"
    assert {IMPORT_NAME[d] for d in declared} == _third_party_imports() - JOB_ENVIRONMENT


def test_every_dependency_has_an_upper_bound() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for dep in [*PYPROJECT["project"]["dependencies"], *(d for extra in FEATURE_EXTRAS for d in extras[extra])]:
        assert "<" in dep, f"{dep} has no upper bound"


def test_version_has_one_source() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "airflow_provider_tony.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", airflow_provider_tony.__version__)


def test_license_and_typing_marker_ship() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    for name in PYPROJECT["project"]["license-files"]:
        assert "Apache License" in (REPO / name).read_text()
    assert (REPO / "airflow_provider_tony" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["airflow_provider_tony"]


def test_changelog_names_the_current_version() -> None:
    assert f"## {airflow_provider_tony.__version__}" in (REPO / "CHANGELOG.md").read_text()
