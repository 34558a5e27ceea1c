"""No unit test module imports another: shared fakes and helpers live in ``tests/unit/support``.

A test module that imports from another runs that module's import-time code and
ties the two together (moving a test breaks an unrelated one); the shared parts
belong in ``support/`` (helpers) or ``conftest.py`` (fixtures).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.support.paths import UNIT


def imports_of_tests(path: Path) -> list[tuple[int, str]]:
    """Every ``import``/``from ... import`` in ``path`` (nested ones too) that names a test module."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            targets = [module] if node.module else [f"{module}{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, t) for t in targets if t.rsplit(".", 1)[-1].startswith("test_") and is_unit(t, node)]
    return found


def is_unit(target: str, node: ast.stmt) -> bool:
    """A relative import from a unit test module, or an absolute one into ``tests.unit``."""
    relative = isinstance(node, ast.ImportFrom) and node.level > 0
    return relative or target.startswith("tests.unit.")


def test_no_unit_test_module_imports_another() -> None:
    offenders = [
        f"{path.relative_to(UNIT)}:{line} imports {target}"
        for path in sorted(UNIT.rglob("test_*.py"))
        for line, target in imports_of_tests(path)
    ]
    assert not offenders, "move what they share into tests/unit/support (or conftest.py): " + "; ".join(offenders)


def test_the_check_sees_each_kind_of_import(tmp_path: Path) -> None:
    """Absolute, relative, ``import x.y`` and a nested import are all caught; support and library ones are not."""
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import os\n"
        "from tests.unit.test_state import T0\n"
        "from .test_gate import spec\n"
        "from . import test_operator\n"
        "import tests.unit.test_retention\n"
        "from tests.unit.support.hdfs import FakeHdfs\n"
        "def f():\n"
        "    from tests.unit.test_kerberos import _writable\n"
    )
    assert [line for line, _ in imports_of_tests(module)] == [2, 3, 4, 5, 8]
