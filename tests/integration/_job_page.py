"""The job page suite's script and browser, shared with test_secure.py (the page through the Kerberized proxy)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


CURVE = str(Path(__file__).parent / "jobs" / "curve.py")


SHOTS = REPO / "test-artifacts" / "screenshots"


CHROMIUM = "/usr/bin/chromium"
