"""Unit tests of ``airflow_provider_tony.runtime``: one module here per subject there."""
