"""Unit tests of ``airflow_provider_tony.yarn``: one module here per subject there."""
