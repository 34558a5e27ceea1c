"""Unit tests of ``airflow_provider_tony.operators``: one module here per subject there."""
