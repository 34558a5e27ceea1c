"""``python -m airflow_provider_tony``: the ``tony`` command (see :mod:`airflow_provider_tony.cli`)."""

from __future__ import annotations

import sys

from airflow_provider_tony.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m airflow_provider_tony"))
