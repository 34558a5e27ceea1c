"""Every benchmark in bench/ still runs: its smallest round on the open part's cluster (bench/smoke.py).

A benchmark runs rarely, so the code it calls changes under it unseen; here each one runs one
short round as ``make bench`` would run it, in its own process, its results in a temporary
folder. No figure is asserted (figures belong in bench/results, not in tests): the test fails
when the benchmark exits non-zero, writes no result, touches ``bench/results/`` or leaves an
application running. The two that cannot run on this cluster are covered at unit level
(``bench/smoke.py``'s ``NOT_HERE``, ``tests/unit/repo/test_bench.py``).
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest

from tests._util import rm_apps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402

ACTIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


def _results_digest() -> dict[str, str]:
    folder = REPO / "bench" / "results"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*")) if p.is_file()}


@pytest.mark.parametrize("name", sorted(smoke.SMOKES))
def test_the_benchmark_still_runs(name: str, cluster, tmp_path: Path) -> None:
    """The benchmark's smallest round ends, writes its result files elsewhere and leaves nothing running."""
    before, started_ms = _results_digest(), int(time.time() * 1000)
    rc, why = smoke.smoke(name, tmp_path / "results")
    assert rc == 0, why
    assert _results_digest() == before, "a smoke run wrote over bench/results/"
    left = [a["id"] for a in rm_apps(cluster.rm_url, states=ACTIVE, tag="tony-bench") if a["startedTime"] >= started_ms]
    if left:
        from airflow_provider_tony.yarn.client import TonyClient

        with TonyClient.from_env() as client:
            for app in left:
                client.kill(app)
    assert not left, f"the benchmark left applications running: {left}"
