"""Where the unit tests find the repository: one constant, so a test module can move between folders.

A module that counted its own parents (``Path(__file__).parents[2]``) broke when it moved one
folder deeper; this module's place under ``tests/unit/support`` is fixed by the layout rule
(``tests/unit/repo/test_test_layout.py``).
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root: ``airflow_provider_tony/``, ``docs/``, ``bench/``, ``tests/`` are under it.
REPO = Path(__file__).resolve().parents[3]
#: The unit tests' root folder.
UNIT = REPO / "tests" / "unit"
#: The generated files the unit tests compare against (the job page's HTML).
SNAPSHOTS = UNIT / "snapshots"
