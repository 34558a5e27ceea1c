"""The package imports without TensorFlow, and Airflow finds the provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import airflow_provider_tony
from airflow_provider_tony.get_provider_info import get_provider_info
from tests.unit.support.paths import REPO


def test_provider_info_names_the_package() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-tony"
    assert info["versions"] == [airflow_provider_tony.__version__]


def test_imports_without_tensorflow() -> None:
    # Setting sys.modules[name] = None makes any `import tensorflow` raise
    # ImportError, as if it were not installed.
    modules = sorted(
        "airflow_provider_tony." + ".".join(p.with_suffix("").relative_to(REPO / "airflow_provider_tony").parts)
        for p in (REPO / "airflow_provider_tony").rglob("*.py")
        if p.name != "__init__.py" and p.name != "__main__.py"
    )
    code = (
        "import sys, importlib\n"
        "for name in ('tensorflow', 'tf_keras', 'keras'):\n"
        "    sys.modules[name] = None\n"
        f"for mod in {modules!r}:\n"
        "    importlib.import_module(mod)\n"
        "print('ok', len(sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")


def test_runtime_never_imports_airflow() -> None:
    code = (
        "import sys, importlib, pkgutil\n"
        "import airflow_provider_tony.runtime as rt\n"
        "for m in pkgutil.iter_modules(rt.__path__):\n"
        "    importlib.import_module('airflow_provider_tony.runtime.' + m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('airflow', 'tensorflow'))\n"
        "print(bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_airflow_lists_the_provider(tmp_path: Path) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    start = proc.stdout.index("[")
    providers = {p["package_name"]: p for p in json.loads(proc.stdout[start:])}
    assert "airflow-provider-tony" in providers
    assert providers["airflow-provider-tony"]["version"] == airflow_provider_tony.__version__


# The Task SDK's public surface: ``airflow.sdk`` itself and its exceptions module.
# ``airflow.sdk.bases.*``, ``airflow.sdk.definitions.*`` and ``airflow.sdk.execution_time.*``
# are internals that move between minor releases; core's ``airflow.models`` and
# ``airflow.utils`` are not for providers' task code either.
# airflow.sdk.log: where the Task SDK exports mask_secret for providers (it also tells the supervisor).
_PUBLIC_SDK = {"airflow.sdk", "airflow.sdk.exceptions", "airflow.sdk.log"}
_FORBIDDEN_PREFIXES = ("airflow.models", "airflow.utils", "airflow.settings")


def _airflow_imports(path: Path) -> list[str]:
    import ast

    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n == "airflow" or n.startswith("airflow.")]


def _bad_import(name: str) -> bool:
    if name.startswith("airflow.sdk"):
        return name not in _PUBLIC_SDK
    return name.startswith(_FORBIDDEN_PREFIXES)


def test_bad_import_rule_itself() -> None:
    assert _bad_import("airflow.sdk.bases.resumablejobmixin")
    assert _bad_import("airflow.sdk.execution_time.xcom")
    assert _bad_import("airflow.models.xcom")
    assert not _bad_import("airflow.sdk")
    assert not _bad_import("airflow.sdk.exceptions")
    assert not _bad_import("airflow.triggers.base")


#: Server-side code (a plugin of the api-server, not task code): it reads the metastore the way
#: Airflow's own routes do, so core's models are its to import.
_SERVER_SIDE = {"airflow_provider_tony/plugins/job_view_app.py"}


def test_only_public_task_sdk_import_paths() -> None:
    files = [*(REPO / "airflow_provider_tony").rglob("*.py"), *(REPO / "dags").rglob("*.py")]
    files = [p for p in files if str(p.relative_to(REPO)) not in _SERVER_SIDE]
    bad = {f"{p.relative_to(REPO)}: {name}" for p in files for name in _airflow_imports(p) if _bad_import(name)}
    assert not bad, f"internal Airflow import paths (use airflow.sdk's public names): {sorted(bad)}"
