"""No function in the package is longer than 80 lines (issue 29: no monoliths).

A long function is where phases blur and a bug hides; the executor's ``main`` and
``convert_tony_xml`` were split for this. The limit counts every line of the definition,
decorators excluded, docstring and comments included.
"""

from __future__ import annotations

import ast

from tests.unit.support.paths import REPO

PACKAGE = REPO / "airflow_provider_tony"
MAX_LINES = 80


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, length)`` of every function in ``source`` longer than ``limit``."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{scope}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    if length > limit:
                        found.append((name, child.lineno, length))
                visit(child, f"{name}.")
            else:
                visit(child, scope)

    visit(ast.parse(source), "")
    return found


def test_no_function_in_the_package_is_over_80_lines() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {name} ({length} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, line, length in long_functions(path.read_text())
    ]
    assert not offenders, "split these into named steps: " + "; ".join(offenders)


def test_the_check_finds_a_long_method_and_a_long_nested_function() -> None:
    body = "    x = 1\n" * MAX_LINES
    source = f"class A:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n" + (
        f"def outer():\n    def inner():\n    {body.replace(chr(10), chr(10) + '    ')}\n    return inner\n"
    )
    names = [name for name, _, _ in long_functions(source)]
    assert names == ["A.m", "outer", "outer.inner"]
    assert long_functions("def f():\n" + "    x = 1\n" * (MAX_LINES - 1)) == []
