"""Unit tests of ``airflow_provider_tony.hooks``: one module here per subject there."""
