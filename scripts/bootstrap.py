"""The one set-up step that ``make demo``, ``make test`` and ``.ci/run`` share: the Debian packages.

Why: a fresh Debian/Ubuntu machine lacks the JDK, Maven and the rest, and the
README's two commands must be the whole set-up there. Run as root, this
installs exactly the packages that are missing (nothing when everything is
present, so it is quick to run before every target); run as anyone else it
names them, prints the one command to run as root, and stops. Then, when asked,
the project's venv (``--venv DIR``: created, and the project installed into it
whenever pyproject.toml is newer than its stamp) and the Hadoop jars
(``--jars``: ``devcluster.py jars``, Maven once, cached after).

    python3 scripts/bootstrap.py [--for demo|test] [--check] [--venv .venv] [--jars]

The Makefile runs it with ``--venv`` when the venv is stale; ``.ci/run`` with
everything before ``make lint`` and ``make test``.

Standard library only: it runs before the venv exists.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Need:
    """A Debian package, how to tell it is already there, and the first target that needs it."""

    package: str
    present: Callable[[], bool]
    purpose: str  # "demo" (the venv and the cluster: every target) or "test" (the test suites only)


def _which(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


def _exists(pattern: str) -> Callable[[], bool]:
    return lambda: bool(glob.glob(pattern))


def _executable(path: str) -> Callable[[], bool]:
    return lambda: os.access(path, os.X_OK)


def _venv_module() -> bool:
    """Debian splits venv's pip bootstrap (ensurepip) into python3-venv."""
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def _python_headers() -> bool:
    return os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))


# The venv builds gssapi from source (krb5-config, a compiler, Python's headers), so those are
# needed by every target; PostgreSQL (Airflow's metadata database in the end-to-end tests),
# Chromium (Playwright; browser downloads do not work everywhere) and the MIT KDC (the Kerberized
# profile) only by the tests.
NEEDS: tuple[Need, ...] = (
    Need("openjdk-17-jdk-headless", _exists("/usr/lib/jvm/java-17-openjdk*"), "demo"),
    Need("maven", _which("mvn"), "demo"),
    Need("python3-venv", _venv_module, "demo"),
    Need("make", _which("make"), "demo"),
    Need("libkrb5-dev", _which("krb5-config"), "demo"),
    Need("gcc", _which("gcc"), "demo"),
    Need("python3-dev", _python_headers, "demo"),
    Need("postgresql", _exists("/usr/lib/postgresql/*/bin/initdb"), "test"),
    Need("chromium", _which("chromium"), "test"),
    Need("util-linux", _which("runuser"), "test"),
    Need("curl", _which("curl"), "test"),
    Need("krb5-kdc", _executable("/usr/sbin/krb5kdc"), "test"),
    Need("krb5-admin-server", _executable("/usr/sbin/kadmin.local"), "test"),
    Need("krb5-user", _which("kinit"), "test"),
)


_HAS_APT = _which("apt-get")


def missing(purpose: str, needs: Sequence[Need] = NEEDS) -> list[str]:
    """The packages ``purpose`` needs that are not installed (``test`` needs the demo's too)."""
    wanted = ("demo",) if purpose == "demo" else ("demo", "test")
    return [need.package for need in needs if need.purpose in wanted and not need.present()]


def install_command(packages: Sequence[str]) -> list[str]:
    return ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]


def bootstrap(
    purpose: str,
    *,
    check: bool = False,
    needs: Sequence[Need] = NEEDS,
    is_root: Callable[[], bool] = lambda: os.geteuid() == 0,
    run: Callable[[list[str]], object] = lambda argv: subprocess.run(argv, check=True),
    has_apt: Callable[[], bool] = _HAS_APT,
    out: Callable[[str], None] = print,
) -> int:
    """0 when everything ``purpose`` needs is there (installed now if root), else 1 with what to do."""
    packages = missing(purpose, needs)
    if not packages:
        return 0
    command = " ".join(install_command(packages))
    if check or not is_root() or not has_apt():
        out(f"missing Debian packages for `make {purpose}`: {' '.join(packages)}")
        out(f"install them as root, then run make again:\n  apt-get update && {command}")
        return 1
    out(f"installing Debian packages for `make {purpose}`: {' '.join(packages)}")
    env_argv = ["env", "DEBIAN_FRONTEND=noninteractive"]
    run([*env_argv, "apt-get", "update", "-q"])
    run([*env_argv, *install_command(packages)])
    still = missing(purpose, needs)
    if still:
        out(f"still missing after apt-get install: {' '.join(still)}")
        return 1
    return 0


REPO = Path(__file__).resolve().parents[1]


def venv_is_current(venv: Path, pyproject: Path = REPO / "pyproject.toml") -> bool:
    """The venv has its interpreter and was installed after pyproject.toml last changed."""
    stamp = venv / ".installed"
    return (venv / "bin" / "python").exists() and stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime


def make_venv(
    venv: Path,
    run: Callable[[list[str]], object] = lambda argv: subprocess.run(argv, check=True),
    pyproject: Path = REPO / "pyproject.toml",
) -> None:
    """The project and its test and lint tools in ``venv`` (what ``make venv`` gives), unless current."""
    if venv_is_current(venv, pyproject):
        return
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run([str(python), "-m", "pip", "install", "-q", "-e", f"{REPO}[test,dev]"])
    (venv / ".installed").touch()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--for", dest="purpose", choices=("demo", "test"), default="test")
    parser.add_argument("--check", action="store_true", help="only say what is missing; install nothing")
    parser.add_argument("--venv", type=Path, help="then create or refresh this venv (e.g. .venv)")
    parser.add_argument("--jars", action="store_true", help="then fetch the Hadoop jars (devcluster.py jars)")
    args = parser.parse_args(argv)
    rc = bootstrap(args.purpose, check=args.check)
    if rc != 0 or args.check:
        return rc
    if args.venv is not None:
        make_venv(args.venv.resolve())
    if args.jars:
        subprocess.run([sys.executable, str(REPO / "devcluster" / "devcluster.py"), "jars"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
