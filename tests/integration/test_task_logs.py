"""The skein driver beside Airflow writes nothing to stderr but real errors.

Airflow shows a task's stderr at ERROR level whatever a line says, so the
Hadoop client's INFO and WARN lines (the ResourceManager address, the native
library notice) looked like failures in every task log.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.cluster]

SNIPPET = """
import os
from airflow_provider_tony.yarn.client import TonyClient
client = TonyClient(rm_url=os.environ["TONY_RM_URL"])
try:
    client.kill("application_1_0001")  # through skein's driver (following no longer starts one)
except Exception as exc:
    print("refused:", exc)
client.close()
"""


def test_the_driver_writes_no_info_or_warn_lines_to_stderr(cluster) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=300, env={**os.environ, **cluster.env}
    )
    assert "refused:" in proc.stdout and "application_1_0001" in proc.stdout, (proc.stdout, proc.stderr)
    noisy = [line for line in proc.stderr.splitlines() if " INFO " in line or " WARN " in line]
    assert noisy == [], noisy
