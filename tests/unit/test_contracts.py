"""The package's contracts, checked over the whole tree: one error hierarchy.

A newcomer catching ``TonyError`` catches everything the provider raises on purpose, and finds
every error class in ``runtime/errors.py``, but for the few that must also be a library's own
exception, which live beside the code that needs that library.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import airflow_provider_tony
from airflow_provider_tony.runtime.errors import TonyError

#: Error classes defined outside runtime/errors.py, and why: each also derives from a library's
#: exception, which runtime/errors.py (imported inside containers, dependency-free) cannot import.
BESIDE_THEIR_LIBRARY = {
    # Airflow fails the task without retrying it on an AirflowFailException.
    "airflow_provider_tony.operators.tony.QualityGateFailed",
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
