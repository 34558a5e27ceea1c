"""Fixtures shared by several unit test modules, and assertion rewriting for their support helpers.

A fixture here is visible to every unit test module, so each is named for what
it gives; a module's own fixture of the same name overrides it there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The helpers under support/ assert (``failed``, ``succeeded``, ...): rewrite
# them as pytest rewrites test modules, so a failing helper shows its values.
pytest.register_assert_rewrite("tests.unit.support")

from tests.unit.support.hdfs import FakeHdfs  # noqa: E402  (after the rewrite hook, so support is rewritten)


@pytest.fixture
def fake(tmp_path: Path) -> FakeHdfs:
    return FakeHdfs(tmp_path / "hdfs")


@pytest.fixture
def local(tmp_path: Path) -> Path:
    """``$TONY_CHECKPOINT_DIR``: its parent (the container's work dir) exists, it need not."""
    (tmp_path / "work").mkdir()
    return tmp_path / "work" / "ckpt"
