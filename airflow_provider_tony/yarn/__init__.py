"""The submitting side's YARN access, without Airflow: used by the hook and the CLI alike."""

from __future__ import annotations
