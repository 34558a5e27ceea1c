"""The package's contracts, checked over the whole tree: one error hierarchy, one list of names.

A newcomer catching ``TonyError`` catches everything the provider raises on purpose, and finds
every error class in ``runtime/errors.py``, but for the few that must also be a library's own
exception, which live beside the code that needs that library. Every environment variable the
provider or TonY defines is spelled once, in ``runtime/constants.py``, as an ``ENV_*`` constant.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import airflow_provider_tony
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import TonyError

#: Error classes defined outside runtime/errors.py, and why: each also derives from a library's
#: exception, which runtime/errors.py (imported inside containers, dependency-free) cannot import.
BESIDE_THEIR_LIBRARY = {
    # Airflow fails the task without retrying it on an AirflowFailException (re-exported by operators/tony.py).
    "airflow_provider_tony.operators.outcome.QualityGateFailed",
    # PyYAML's composer raises it while composing, with the node's position.
    "airflow_provider_tony.runtime.jobyaml.JobYamlError",
    # The hdfs package and requests take it for a connection error (their retries, our redaction).
    "airflow_provider_tony.runtime.webhdfs_failover.NoActiveNameNode",
}


def _error_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    package = airflow_provider_tony
    for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(module_info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_error_class_is_a_tony_error_defined_in_the_errors_module() -> None:
    classes = _error_classes()
    assert len(classes) > 20, sorted(classes)  # the walk found the package's modules
    outside = {name for name, cls in classes.items() if not issubclass(cls, TonyError)}
    assert not outside, f"not TonyErrors: {sorted(outside)}"
    elsewhere = {name for name in classes if not name.startswith("airflow_provider_tony.runtime.errors.")}
    assert elsewhere == BESIDE_THEIR_LIBRARY, f"error classes outside runtime/errors.py: {sorted(elsewhere)}"


PACKAGE_DIR = Path(airflow_provider_tony.__file__).parent
#: A provider variable's name, or a template of one (``TONY_INPUT_{}_DIR``).
_TONY_NAME = re.compile(r"TONY_[A-Z0-9_{}]*")


def _env_constants() -> dict[str, str]:
    """constants.py's module-level names whose value is an environment variable's name (upper case)."""
    return {
        name: value
        for name, value in vars(C).items()
        if isinstance(value, str) and re.fullmatch(r"[A-Z][A-Z0-9_{}]*", value)
    }


def test_every_environment_variable_name_is_an_env_constant_defined_once() -> None:
    env = _env_constants()
    assert not [name for name in env if not name.startswith("ENV_")], "names an env var but is not ENV_*"
    values = list(env.values())
    assert len(values) == len(set(values)), sorted(v for v in values if values.count(v) > 1)
    # The provider's own start with TONY_; a constant named ENV_TONY_* is TonY's, in TonY's spelling.
    tonys = {name: value for name, value in env.items() if name.startswith("ENV_TONY_")}
    assert tonys and not [v for v in tonys.values() if v.startswith("TONY_")], tonys
    spelled_elsewhere = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name == "constants.py" and path.parent.name == "runtime":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if _TONY_NAME.fullmatch(text) or text in tonys.values():
                    spelled_elsewhere.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}: {text!r}")
    assert not spelled_elsewhere, "spell these with runtime/constants.py's ENV_* names:\n" + "\n".join(
        spelled_elsewhere
    )


def _imports(path: Path) -> set[str]:
    """Every module of the package ``path`` imports, at module level or inside a function (a
    function-level import is still a dependency; it only hides a circle), but not the imports
    that run only under ``typing.TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return found


def test_the_package_has_no_import_circle() -> None:
    modules = {_module_name(path): path for path in PACKAGE_DIR.rglob("*.py")}
    graph = {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 100  # the walk saw the package's imports
    assert _circles(graph) == []
    # The check itself finds a circle hidden by a function-level import.
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
