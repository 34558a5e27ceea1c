"""The Kerberized profile's marks and jobs, shared by test_secure.py and test_secure_trust.py.

Its principals (the ``krb``, ``other`` and ``tag`` fixtures) are in conftest.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.spec import JobSpec

#: test_secure's and test_secure_trust's marks: the Kerberized profile only.
MARKS = [
    pytest.mark.cluster,
    pytest.mark.secure,
    pytest.mark.skipif(
        not os.environ.get("TONY_KERBEROS_PRINCIPAL"),
        reason="needs the Kerberized profile: make test-secure (or TONY_DEVCLUSTER_SECURE=1)",
    ),
]


JOBS = Path(__file__).parent / "jobs"


def job(name: str, script: str, *args: str, checkpoint: str | None = None, **extra: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": name,
        "roles": {"worker": {"memory": "1 GiB", "script": str(JOBS / script), "args": list(args)}},
        "python": {"interpreter": sys.executable},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 60,
        **extra,
    }
    if checkpoint:
        data["checkpoint"] = {"dir": checkpoint, "poll_interval": 0.5}
    return JobSpec.from_dict(data)
