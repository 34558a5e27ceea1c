"""Stands in for the ResourceManager's application reports that the follower reads.

The application id, its tracking URL, the follower's clock origin and timeouts,
and ``report`` building one ``AppReport``: shared by the follower and outcome tests.
"""

from __future__ import annotations

from airflow_provider_tony.yarn.follower import AppReport

APP = "application_1700000000000_0007"


URL = f"http://rm:8088/cluster/app/{APP}"


T0 = 500.0


STARTUP, STALE = 60.0, 30.0


def report(state: str, final_status: str = "UNDEFINED", diagnostics: str = "") -> AppReport:
    return AppReport(app_id=APP, state=state, final_status=final_status, diagnostics=diagnostics, tracking_url=URL)
