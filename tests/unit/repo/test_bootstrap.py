"""`scripts/bootstrap.py`: which Debian packages a target needs, and what it does as root and as anyone else.

The probes are swapped for fixed answers, so no package is installed and nothing depends on this
machine; the last test runs the real script with ``--check``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests._util import load_script
from tests.unit.support.paths import REPO


def _load() -> ModuleType:
    return load_script("scripts/bootstrap.py", "tony_bootstrap_under_test")


bs = _load()


def _needs(present: set[str]) -> tuple[object, ...]:
    """The script's own table, with each probe answering from ``present``."""
    return tuple(bs.Need(n.package, lambda p=n.package: p in present, n.purpose) for n in bs.NEEDS)


ALL = {n.package for n in bs.NEEDS}


def test_demo_needs_the_venv_and_cluster_packages_and_test_adds_the_suites() -> None:
    nothing = _needs(set())
    demo, test = bs.missing("demo", nothing), bs.missing("test", nothing)
    assert {"openjdk-17-jdk-headless", "maven", "python3-venv", "make", "libkrb5-dev", "gcc", "python3-dev"} == set(
        demo
    )
    assert set(test) == ALL
    assert {"postgresql", "chromium", "krb5-kdc", "krb5-admin-server", "krb5-user"} <= set(test) - set(demo)
    # What .ci/run installed before this script existed: none of it is lost.
    assert {"util-linux", "curl"} <= set(test)


def test_nothing_missing_is_a_silent_no_op_even_for_root() -> None:
    ran: list[list[str]] = []
    lines: list[str] = []
    rc = bs.bootstrap("test", needs=_needs(ALL), is_root=lambda: True, run=ran.append, out=lines.append)
    assert (rc, ran, lines) == (0, [], [])


def test_root_installs_exactly_what_is_missing() -> None:
    present = ALL - {"maven", "chromium"}
    ran: list[list[str]] = []

    def apt(argv: list[str]) -> None:
        ran.append(argv)
        if "install" in argv:
            present.update({"maven", "chromium"})

    rc = bs.bootstrap(
        "test", needs=_needs(present), is_root=lambda: True, run=apt, has_apt=lambda: True, out=lambda _: None
    )
    assert rc == 0
    assert ran[0][-3:] == ["apt-get", "update", "-q"]
    assert ran[1][:2] == ["env", "DEBIAN_FRONTEND=noninteractive"]
    assert ran[1][2:] == ["apt-get", "install", "-y", "-q", "--no-install-recommends", "maven", "chromium"]


def test_root_fails_when_the_install_did_not_provide_it() -> None:
    lines: list[str] = []
    rc = bs.bootstrap(
        "demo",
        needs=_needs(ALL - {"gcc"}),
        is_root=lambda: True,
        run=lambda _: None,
        has_apt=lambda: True,
        out=lines.append,
    )
    assert rc == 1 and lines[-1] == "still missing after apt-get install: gcc"


def test_anyone_else_is_told_the_exact_command_and_nothing_runs() -> None:
    ran: list[list[str]] = []
    lines: list[str] = []
    rc = bs.bootstrap(
        "demo",
        needs=_needs(ALL - {"maven", "postgresql"}),
        is_root=lambda: False,
        run=ran.append,
        has_apt=lambda: True,
        out=lines.append,
    )
    assert (rc, ran) == (1, [])
    # The demo does not need PostgreSQL: only Maven is named.
    assert lines[0] == "missing Debian packages for `make demo`: maven"
    assert lines[1].endswith("apt-get update && apt-get install -y -q --no-install-recommends maven")


def test_check_only_installs_nothing_even_as_root() -> None:
    ran: list[list[str]] = []
    rc = bs.bootstrap("test", check=True, needs=_needs(set()), is_root=lambda: True, run=ran.append, out=lambda _: None)
    assert (rc, ran) == (1, [])


def test_the_real_script_reports_in_the_shape_make_relies_on() -> None:
    """The real probes on this machine: silent 0 when complete (every target runs it), else 1 naming the packages."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bootstrap.py"), "--for", "test", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    expected = [n.package for n in bs.NEEDS if not n.present()]
    if not expected:
        assert (done.returncode, done.stdout) == (0, "")
    else:
        assert done.returncode == 1
        assert done.stdout.splitlines()[0] == f"missing Debian packages for `make test`: {' '.join(expected)}"


def test_the_venv_is_made_once_and_reinstalled_only_when_pyproject_changes(tmp_path: Path) -> None:
    import os

    venv, pyproject = tmp_path / "venv", tmp_path / "pyproject.toml"
    pyproject.write_text("[project]\n")
    ran: list[list[str]] = []

    def fake(argv: list[str]) -> None:
        ran.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").touch()

    assert not bs.venv_is_current(venv, pyproject)
    bs.make_venv(venv, run=fake, pyproject=pyproject)
    assert [argv[1:3] for argv in ran] == [["-m", "venv"], ["-m", "pip"], ["-m", "pip"]]
    assert ran[2][-1].endswith("[test,dev]")
    assert bs.venv_is_current(venv, pyproject)
    # A newer pyproject.toml (a new dependency): installed again, the venv itself kept.
    earlier = pyproject.stat().st_mtime - 10
    os.utime(venv / ".installed", (earlier, earlier))
    assert not bs.venv_is_current(venv, pyproject)
    bs.make_venv(venv, run=fake, pyproject=pyproject)
    assert [argv[1:3] for argv in ran[3:]] == [["-m", "pip"], ["-m", "pip"]]
    bs.make_venv(venv, run=fake, pyproject=pyproject)
    assert len(ran) == 5, "a current venv is left alone"
