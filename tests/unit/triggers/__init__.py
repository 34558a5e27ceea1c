"""Unit tests of ``airflow_provider_tony.triggers``: one module here per subject there."""
