"""Provider metadata, found by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_tony import __version__
from airflow_provider_tony.connection import connection_form


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's ProvidersManager.

    Kept free of heavy imports: Airflow calls it while listing providers, in
    every process, long before any task runs.
    """
    return {
        "package-name": "airflow-provider-tony",
        "name": "TonY on YARN",
        "description": "Run distributed TensorFlow training on Hadoop YARN (chief/worker/ps/evaluator), "
        "watched to the end and resumed from HDFS checkpoints on retry.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Hadoop YARN (TonY)",
                "external-doc-url": "https://hadoop.apache.org/docs/stable/hadoop-yarn/hadoop-yarn-site/YARN.html",
                "tags": ["apache", "ml"],
            }
        ],
        "operators": [
            {"integration-name": "Hadoop YARN (TonY)", "python-modules": ["airflow_provider_tony.operators.tony"]}
        ],
        "hooks": [{"integration-name": "Hadoop YARN (TonY)", "python-modules": ["airflow_provider_tony.hooks.yarn"]}],
        "triggers": [
            {"integration-name": "Hadoop YARN (TonY)", "python-modules": ["airflow_provider_tony.triggers.tony"]}
        ],
        "connection-types": [connection_form()],
        "extra-links": [
            "airflow_provider_tony.links.TonyJobLink",
            "airflow_provider_tony.links.YarnApplicationLink",
            "airflow_provider_tony.links.TensorBoardLink",
        ],
    }
