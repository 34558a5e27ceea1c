"""``make test``'s own logic: every part runs, and the first failing part's exit code is the result.

The parts run side by side by default (``TEST_PARALLEL=1``) and one after the other with
``TEST_PARALLEL=0``; in both, a failing part must fail the whole run, whichever it is. The
recipe is run for real by make, with ``$(MAKE)`` replaced by a stand-in that records which
part ran and exits with the code the test gives it, and the prerequisites (bootstrap, venv)
marked as done: no cluster, no pytest.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PARTS = ("test-open", "test-secure", "test-chaos", "test-ha")


def _make_test(tmp_path: Path, parallel: str, codes: dict[str, int]) -> tuple[int, str, list[str]]:
    fake = tmp_path / "fake-make"
    ran = tmp_path / "ran"
    # The stand-in's last argument is the target; it appends it to `ran` and exits with its code.
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'target="${@: -1}"\n'
        f'echo "$target" >> "{ran}"\n'
        'var="CODE_${target//-/_}"\n'
        'exit "${!var:-0}"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, **{f"CODE_{t.replace('-', '_')}": str(c) for t, c in codes.items()}}
    proc = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-o",
            "bootstrap-test",
            "-o",
            "venv",
            "-o",
            "bootstrap",
            "test",
            f"MAKE={fake}",
            "PY=true",
            f"TEST_PARALLEL={parallel}",
            f"PARTS={tmp_path / 'parts'}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stderr, ran.read_text().split() if ran.exists() else []


@pytest.mark.parametrize("parallel", ["1", "0"])
@pytest.mark.parametrize(
    ("codes", "first"),
    [
        ({}, None),
        ({"test-open": 3}, 3),
        ({"test-secure": 4}, 4),
        ({"test-chaos": 5}, 5),
        ({"test-open": 3, "test-chaos": 5}, 3),
        ({"test-secure": 4, "test-chaos": 5}, 4),
        ({"test-ha": 6}, 6),
        ({"test-chaos": 5, "test-ha": 6}, 5),
    ],
)
def test_every_part_runs_and_any_failure_fails_make_test(
    tmp_path: Path, parallel: str, codes: dict[str, int], first: int | None
) -> None:
    """``first``: the exit code of the first failing part (open, secure, chaos, ha), which the recipe
    ends with (make itself then exits 2 and names it); None: every part passed."""
    rc, stderr, ran = _make_test(tmp_path, parallel, codes)
    assert sorted(ran) == sorted(PARTS), ran
    if first is None:
        assert rc == 0, stderr
    else:
        assert rc == 2 and f"test] Error {first}" in stderr, (codes, rc, stderr)
    if parallel == "0":
        assert ran == list(PARTS), "one after the other: open, secure, chaos"
