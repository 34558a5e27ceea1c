"""``make test``'s own logic: every part runs, and the first failing part's exit code is the result.

The same holds one level down for ``make test-open``'s lanes (unit, open, open2): each runs,
side by side sharing the cluster (``TONY_TEST_LANES=1``) or one after the other, and the first
failing lane fails the open part.

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

from tests.unit.support.paths import REPO

#: The make running these tests (``make test-fast PYTEST_ARGS=...``) hands its command-line
#: variables down in MAKEFLAGS: the make under test must not inherit them.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS")}
PARTS = ("test-open", "test-secure", "test-chaos", "test-ha", "test-ha-secure")


LANES = ("test-lane-open", "test-lane-open2", "test-lane-unit")


def _make_test(
    tmp_path: Path, parallel: str, codes: dict[str, int], target: str = "test", extra: tuple[str, ...] = ()
) -> tuple[int, str, list[str]]:
    fake = tmp_path / "fake-make"
    ran = tmp_path / "ran"
    # The stand-in's last argument is the target; it appends it to `ran` (with "+lanes" when it
    # was told the lanes share the cluster) and exits with its code.
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'target="${@: -1}"\n'
        'shared=""; for a in "$@"; do [ "$a" != TONY_TEST_LANES=1 ] || shared="+lanes"; done\n'
        f'echo "$target$shared" >> "{ran}"\n'
        'var="CODE_${target//-/_}"\n'
        'exit "${!var:-0}"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**CLEAN_ENV, **{f"CODE_{t.replace('-', '_')}": str(c) for t, c in codes.items()}}
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
            "-o",
            "cluster-up",
            target,
            f"MAKE={fake}",
            "DEVCLUSTER=true",
            "PY=true",
            f"TEST_PARALLEL={parallel}",
            f"PARTS={tmp_path / 'parts'}",
            *extra,
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
        ({"test-ha-secure": 7}, 7),
        ({"test-ha": 6, "test-ha-secure": 7}, 6),
    ],
)
def test_every_part_runs_and_any_failure_fails_make_test(
    tmp_path: Path, parallel: str, codes: dict[str, int], first: int | None
) -> None:
    """``first``: the exit code of the first failing part (open, secure, chaos, ha, ha-secure), which the recipe
    ends with (make itself then exits 2 and names it); None: every part passed."""
    rc, stderr, ran = _make_test(tmp_path, parallel, codes)
    assert sorted(ran) == sorted(PARTS), ran
    if first is None:
        assert rc == 0, stderr
    else:
        assert rc == 2 and f"test] Error {first}" in stderr, (codes, rc, stderr)
    if parallel == "0":
        assert ran == list(PARTS), "one after the other: open, secure, chaos, ha, ha-secure"


@pytest.mark.parametrize("parallel", ["1", "0"])
@pytest.mark.parametrize(
    ("codes", "first"),
    [
        ({}, None),
        ({"test-lane-open": 3}, 3),
        ({"test-lane-open2": 4}, 4),
        ({"test-lane-unit": 5}, 5),
        ({"test-lane-open2": 4, "test-lane-unit": 5}, 4),
        ({"test-lane-open": 3, "test-lane-unit": 5}, 3),
    ],
)
def test_every_lane_of_the_open_part_runs_and_any_failure_fails_it(
    tmp_path: Path, parallel: str, codes: dict[str, int], first: int | None
) -> None:
    """``make test-open`` runs its three lanes, side by side on one cluster (``TONY_TEST_LANES=1``,
    so ``whole_cluster`` tests hold it alone) or one after the other, and fails with the first
    failing lane's code (open, open2, unit)."""
    rc, stderr, ran = _make_test(tmp_path, parallel, codes, target="test-open")
    lanes = [lane.removesuffix("+lanes") for lane in ran]
    assert sorted(lanes) == sorted(LANES), ran
    if parallel == "1":
        assert all(lane.endswith("+lanes") for lane in ran), f"lanes side by side must share the cluster: {ran}"
    else:
        assert ran == list(LANES), "one after the other: open, open2, unit; none told it shares the cluster"
    if first is None:
        assert rc == 0, stderr
    else:
        assert rc == 2 and f"test-open] Error {first}" in stderr, (codes, rc, stderr)


def test_a_lane_that_selects_nothing_fails_unless_the_run_is_narrowed(tmp_path: Path) -> None:
    """pytest's exit 5 (nothing collected) in a lane fails a full run; with PYTEST_ARGS (-k ...) it does not."""
    stub = tmp_path / "py"
    stub.write_text("#!/usr/bin/env bash\nexit 5\n")
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    common = ["make", "--no-print-directory", "-o", "venv", "test-lane-unit", f"PY={stub}", "CLUSTER_ENV=true"]
    full = subprocess.run(common, cwd=REPO, env=CLEAN_ENV, capture_output=True, text=True, timeout=60)
    assert full.returncode == 2 and "Error 5" in full.stderr, full.stderr
    narrow = subprocess.run(
        [*common, "PYTEST_ARGS=-k nothing"], cwd=REPO, env=CLEAN_ENV, capture_output=True, text=True, timeout=60
    )
    assert narrow.returncode == 0, narrow.stderr


def test_a_suite_on_a_cluster_of_its_own_is_never_collected_by_the_open_part() -> None:
    """A conftest that points the process at its own cluster (``use_..._cluster()`` at import) would
    point the whole open lane at it: the open part must ignore that folder (its own target runs it)."""
    own = sorted(
        p.parent.name
        for p in (REPO / "tests").glob("*/conftest.py")
        if any(line.startswith("use_") and line.rstrip().endswith("_cluster()") for line in p.read_text().splitlines())
    )
    assert {"chaos", "ha", "ha_secure"} <= set(own), own
    makefile = (REPO / "Makefile").read_text()
    ignored = makefile.split("OPEN_IGNORE :=", 1)[1].split("\nLANE_ARGS_open", 1)[0]
    assert [d for d in own if f"--ignore=tests/{d} " not in ignored.replace("\\\n", " ") + " "] == []
    for folder in own:
        assert f"pytest tests/{folder} " in makefile, f"no make target runs tests/{folder}"
