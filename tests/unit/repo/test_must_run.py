"""Where every test must run (``make test``, ``make test-secure``, ``make test-chaos``, so CI), a skip fails.

The Kerberos module skips itself when the principal variable is unset; before,
``make test-secure`` was then green with nothing run. These run pytest itself
on that module (collection and the skip only: no cluster is touched).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.unit.support.paths import REPO


def _pytest_secure(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TONY_KERBEROS", "TONY_TEST"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration/test_secure.py", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_secure_suite_without_its_principal_fails_where_it_must_run() -> None:
    proc = _pytest_secure(TONY_TESTS_MUST_RUN="1", TONY_TEST_PART="unit-check-secure")
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "skipped where every test must run" in proc.stdout and "TONY_KERBEROS_PRINCIPAL" not in proc.stderr
    assert " passed" not in proc.stdout.splitlines()[-1], proc.stdout[-500:]
    summary = REPO / "test-artifacts" / "parts" / "unit-check-secure.json"
    try:
        import json

        counts = json.loads(summary.read_text())
        assert counts["passed"] == 0 and counts["skipped"] == 0 and counts["error"] > 0, counts
    finally:
        summary.unlink(missing_ok=True)


def test_run_by_hand_the_same_module_just_skips() -> None:
    proc = _pytest_secure()
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "skipped" in proc.stdout.splitlines()[-1]
