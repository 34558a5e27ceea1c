"""The tests' layout: unit tests mirror the package, and no test module imports another.

A newcomer looking for the tests of ``airflow_provider_tony/yarn/submit.py`` finds them in
``tests/unit/yarn/``; those of a top-level module (``cli.py``, ``retention.py``) in ``tests/unit/``;
those of the repository's own tooling (docs, make, bench, devcluster) in ``tests/unit/repo/``.

A test module that imports from another runs that module's import-time code and ties the two
together (moving a test breaks an unrelated one); the shared parts belong in a helper module
(``tests/unit/support``, ``tests/_util.py``, ``tests/_airflow.py``, a suite's ``_support.py``)
or, for fixtures, in a ``conftest.py``. A test module does not import from a conftest either.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.support.paths import REPO, UNIT

TESTS = REPO / "tests"
PACKAGE = REPO / "airflow_provider_tony"
#: Folders of tests/unit that hold no test modules: the shared fakes and the reviewed files.
NOT_TEST_FOLDERS = ("support", "snapshots")
#: The folder for tests of the repository's tooling rather than of the package.
REPO_FOLDER = "repo"
#: Modules that import their subject only in the child processes they start (in a script's text).
IMPORTS_IN_A_CHILD = {"runtime/test_progress_keras.py"}


def subpackages() -> set[str]:
    """``runtime``, ``yarn``, ``operators``, ...: the package's folders that are packages."""
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def top_level_modules() -> set[str]:
    """``cli``, ``retention``, ``__main__``, ...: the package's own modules, outside its subpackages."""
    return {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}


def _imports(path: Path) -> list[tuple[int, list[str]]]:
    """Each ``import``/``from ... import`` in ``path`` (nested ones too): its line and the dotted names it reaches."""
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            joined = module if module.endswith(".") else f"{module}."
            found.append((node.lineno, [module, *(f"{joined}{alias.name}" for alias in node.names)]))
        elif isinstance(node, ast.Import):
            found.append((node.lineno, [alias.name for alias in node.names]))
    return found


def imports_of_tests(path: Path) -> list[tuple[int, str]]:
    """The imports in ``path`` that name a test module or a conftest of ours (absolute or relative)."""
    found: list[tuple[int, str]] = []
    for line, names in _imports(path):
        targets = [n for n in names if n.startswith(("tests.", ".")) and _is_test_or_conftest(n)]
        found += [(line, targets[0])] if targets else []
    return sorted(found)


def _is_test_or_conftest(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def package_imports(path: Path) -> set[str]:
    """The dotted names under ``airflow_provider_tony`` that ``path`` imports (modules and names from them)."""
    return {n for _, names in _imports(path) for n in names if n.startswith("airflow_provider_tony.")}


def misplaced(unit: Path, subs: set[str], top: set[str]) -> list[str]:
    """Why each unit test module under ``unit`` is not where the layout says it belongs."""
    wrong = []
    for path in sorted(unit.rglob("test_*.py")):
        where = path.relative_to(unit)
        folder = where.parts[0] if len(where.parts) > 1 else ""
        reached = package_imports(path)
        if str(where) in IMPORTS_IN_A_CHILD:
            continue
        if len(where.parts) > 2 or (folder and folder not in subs | {REPO_FOLDER}):
            wrong.append(f"{where}: not in tests/unit, tests/unit/<subpackage> or tests/unit/{REPO_FOLDER}")
        elif folder in subs and not any(n.startswith(f"airflow_provider_tony.{folder}.") for n in reached):
            wrong.append(f"{where}: imports nothing from airflow_provider_tony.{folder}")
        elif not folder and not any(n.split(".")[1] in top for n in reached):
            wrong.append(f"{where}: imports no top-level module of the package ({', '.join(sorted(top))})")
    return wrong


def test_every_unit_test_module_mirrors_the_package() -> None:
    assert [m for m in IMPORTS_IN_A_CHILD if not (UNIT / m).is_file()] == [], "IMPORTS_IN_A_CHILD names a gone module"
    wrong = misplaced(UNIT, subpackages(), top_level_modules())
    assert not wrong, "move each to the folder of the package module it tests (docs/development.md, Layout): " + (
        "; ".join(wrong)
    )


def test_the_unit_folders_are_packages_and_the_support_folders_hold_no_tests() -> None:
    folders = [p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert {p.name for p in folders} >= {"support", "snapshots", REPO_FOLDER, "runtime", "yarn"}
    assert [p for p in folders if p.name != "snapshots" and not (p / "__init__.py").exists()] == []
    assert [p for name in NOT_TEST_FOLDERS for p in (UNIT / name).rglob("test_*.py")] == []


def test_no_test_module_imports_another_or_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{line} imports {target}"
        for path in sorted(TESTS.rglob("test_*.py"))
        for line, target in imports_of_tests(path)
    ]
    helpers = "a helper module (tests/unit/support, tests/_util.py, a suite's _support.py), fixtures into conftest.py"
    assert not offenders, f"move what they share into {helpers}: " + "; ".join(offenders)


def test_the_check_sees_each_kind_of_import(tmp_path: Path) -> None:
    """Absolute, relative, ``import x.y``, a nested import and a conftest's are all caught; helpers are not."""
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import os\n"
        "from tests.unit.test_state import T0\n"
        "from .test_gate import spec\n"
        "from . import test_operator\n"
        "import tests.integration.test_retention\n"
        "from tests.unit.support.hdfs import FakeHdfs\n"
        "def f():\n"
        "    from tests.chaos.test_node_loss import step_of\n"
        "from tests.e2e.conftest import admin_login\n"
        "from tests._util import wait_until\n"
        "from tests.chaos._support import wait_resumed\n"
    )
    assert [line for line, _ in imports_of_tests(module)] == [2, 3, 4, 5, 8, 9]


def test_the_layout_check_sees_a_module_out_of_place(tmp_path: Path) -> None:
    """A folder that mirrors nothing, a subpackage test that imports another subpackage, a root test
    that imports only a subpackage, a folder too deep: each named; a right one is not."""
    for where, text in {
        "yarn/test_right.py": "from airflow_provider_tony.yarn import submit\n",
        "test_right.py": "from airflow_provider_tony import cli\n",
        "repo/test_tooling.py": "import json\n",
        "stuff/test_nowhere.py": "from airflow_provider_tony.yarn import submit\n",
        "yarn/test_other.py": "from airflow_provider_tony.runtime.spec import JobSpec\n",
        "test_deep.py": "from airflow_provider_tony.runtime.spec import JobSpec\n",
        "yarn/deeper/test_deep.py": "from airflow_provider_tony.yarn import submit\n",
    }.items():
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(text)
    wrong = misplaced(tmp_path, {"yarn", "runtime"}, {"cli"})
    assert [w.split(":")[0] for w in wrong] == [
        "stuff/test_nowhere.py",
        "test_deep.py",
        "yarn/deeper/test_deep.py",
        "yarn/test_other.py",
    ]
