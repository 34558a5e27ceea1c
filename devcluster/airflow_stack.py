#!/usr/bin/env python3
"""Airflow as users run it, beside the local YARN cluster: PostgreSQL + the four services.

    python devcluster/airflow_stack.py up|down|env

PostgreSQL (Debian's, run as the ``postgres`` user on 127.0.0.1) is the
metadata database; ``airflow api-server``, ``scheduler``, ``dag-processor``
and ``triggerer`` run with the LocalExecutor against ``dags/`` and the local
cluster's connection. State lives in ``$TONY_DEVCLUSTER_HOME/airflow-stack``;
ports derive from ``$TONY_DEVCLUSTER_PORT_BASE`` (API/UI on base+380,
PostgreSQL on base+432). ``down`` stops exactly what ``up`` started.
Standard library only; Airflow is the project venv's.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from devcluster import is_alive  # noqa: E402 - the sibling launcher's process helper

SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
PG_BIN = Path("/usr/lib/postgresql")
USER, PASSWORD = "admin", "admin"


class StackError(RuntimeError):
    pass


#: The tripwire's record of a call to ``java``.
JAVA_TRIPWIRE_LOG = "java-called.log"
SYSTEM_BIN = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")


def without_java(env: dict[str, str], tripwire_dir: Path) -> dict[str, str]:
    """``env`` as an Airflow image without a JDK sees it: no ``JAVA_HOME``, no working ``java`` on ``PATH``.

    The provider submits, follows and kills over HTTP; nothing on the Airflow
    side may start a JVM (the cluster's daemons keep their own environment).
    Every ``PATH`` folder holding a ``java`` is left out but the system's own
    (``/usr/bin`` holds Debian's alternatives link beside every other tool),
    and a tripwire ``java`` goes first, shadowing those: it records its arguments in
    ``<tripwire_dir>/java-called.log`` and fails, so a test can assert that
    nothing tried (skein's driver looks for ``$JAVA_HOME/bin/java``, then
    ``java`` on ``PATH``).
    """
    tripwire_dir.mkdir(parents=True, exist_ok=True)
    shim = tripwire_dir / "java"
    log = tripwire_dir / JAVA_TRIPWIRE_LOG
    log.unlink(missing_ok=True)
    shim.write_text(f'#!/bin/sh\necho "$PPID $*" >> {shlex.quote(str(log))}\nexit 127\n')
    shim.chmod(0o755)
    # A JDK's own bin folder goes; a system folder (/usr/bin holds the alternatives link to java,
    # and everything else Airflow may call) stays, shadowed by the tripwire.
    folders = [
        d for d in env.get("PATH", "").split(os.pathsep) if d and (d in SYSTEM_BIN or not (Path(d) / "java").exists())
    ]
    out = {k: v for k, v in env.items() if k not in ("JAVA_HOME", "JDK_HOME", "JRE_HOME")}
    out["PATH"] = os.pathsep.join([str(tripwire_dir), *folders])
    return out


#: Where every JDK of this machine lives (Debian's and the installed Temurin).
JDK_ROOT = "/usr/lib/jvm"


@functools.lru_cache(maxsize=1)
def hide_jdks_prefix() -> tuple[str, ...]:
    """A command prefix that runs its command with ``JDK_ROOT`` empty: no JDK on disk as it sees it.

    A private mount namespace with a tmpfs over ``JDK_ROOT`` (root may make
    one; the command keeps its PID, ``unshare`` and ``sh`` exec it). () where
    the kernel refuses one: ``without_java``'s PATH and tripwire still apply.
    Past the probe, a failure to hide the JDKs fails the command rather than
    running it with them visible.
    """
    unshare = shutil.which("unshare")
    if unshare is None or not Path(JDK_ROOT).is_dir():
        return ()
    namespace = (unshare, "--mount", "--propagation", "private", "--")
    if subprocess.run([*namespace, "true"], capture_output=True, timeout=30).returncode != 0:
        return ()
    script = f'mount -t tmpfs tony-no-jdk {JDK_ROOT} && [ -z "$(ls -A {JDK_ROOT})" ] && exec "$@"'
    return (*namespace, "sh", "-c", script, "sh")


def java_calls(tripwire_dir: Path) -> str:
    """What tried to run ``java`` under :func:`without_java` ("" when nothing did)."""
    log = tripwire_dir / JAVA_TRIPWIRE_LOG
    return log.read_text() if log.exists() else ""


def layout() -> dict[str, object]:
    home = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster")).resolve() / "airflow-stack"
    base = int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", "19000"))
    return {"home": home, "api_port": base + 380, "pg_port": base + 432}


def pg_bin(name: str) -> str:
    found = sorted(PG_BIN.glob(f"*/bin/{name}"))
    if not found:
        raise StackError("PostgreSQL server not found: apt-get install postgresql")
    return str(found[-1])


def as_postgres(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """PostgreSQL refuses to run as root; run its tools as the postgres user."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def airflow_env(lay: dict[str, object]) -> dict[str, str]:
    home = Path(lay["home"])  # type: ignore[arg-type]
    api = f"http://127.0.0.1:{lay['api_port']}"
    return {
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@127.0.0.1:{lay['pg_port']}/airflow",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__PORT": str(lay["api_port"]),
        "AIRFLOW__API__BASE_URL": api,
        "AIRFLOW__API_AUTH__JWT_SECRET": "tony-devcluster-only",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "AIRFLOW__CORE__PARALLELISM": "8",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }


def _pid(home: Path, name: str) -> int | None:
    path = home / "run" / f"{name}.pid"
    if path.exists():
        pid = int(path.read_text())
        if is_alive(pid):
            return pid
    return None


def _health(api_port: object) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/api/v2/monitor/health", timeout=5) as r:
        return json.load(r)


def airflow_beside(python: str) -> str:
    """The ``airflow`` script of the venv whose interpreter is ``python``, as an absolute path.

    Absolute because the services start with ``cwd`` set to the stack's home, where a
    relative ``.venv/bin/airflow`` (what ``make airflow-up`` passes) names nothing. Made
    absolute with ``abspath``, not ``resolve()``: a venv's python is a symlink to the base
    interpreter, and following it would look for ``airflow`` outside the venv.
    """
    airflow = os.path.join(os.path.dirname(os.path.abspath(python)), "airflow")
    if not os.access(airflow, os.X_OK):
        raise StackError(
            f"--python {python!r}: no airflow script beside it ({airflow}); pass the python of "
            "the venv Airflow is installed in (make venv creates .venv)"
        )
    return airflow


def up(python: str) -> None:
    airflow = airflow_beside(python)
    lay = layout()
    home = Path(lay["home"])  # type: ignore[arg-type]
    for sub in ("run", "logs", "airflow"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    pgdata = home / "pgdata"
    if not (pgdata / "PG_VERSION").exists():
        pgdata.mkdir(exist_ok=True)
        os.chown(pgdata, *_postgres_ids())
        out = as_postgres([pg_bin("initdb"), "-D", str(pgdata), "-A", "trust", "-U", "postgres"])
        if out.returncode:
            raise StackError(f"initdb failed: {out.stderr[-2000:]}")
    sock = home / "pgsock"
    sock.mkdir(exist_ok=True)
    os.chown(sock, *_postgres_ids())
    status = as_postgres([pg_bin("pg_ctl"), "-D", str(pgdata), "status"])
    if status.returncode != 0:
        log = home / "logs" / "postgresql.log"
        log.touch()
        os.chown(log, *_postgres_ids())
        opts = f"-p {lay['pg_port']} -k {sock} -c listen_addresses=127.0.0.1"
        out = as_postgres([pg_bin("pg_ctl"), "-D", str(pgdata), "-o", opts, "-l", str(log), "-w", "start"])
        if out.returncode:
            raise StackError(f"PostgreSQL did not start: {out.stderr[-1000:]}\n{log.read_text()[-2000:]}")
    exists = as_postgres(
        [
            pg_bin("psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(lay["pg_port"]),
            "-U",
            "postgres",
            "-tAc",
            "select 1 from pg_database where datname='airflow'",
        ]
    )
    if exists.stdout.strip() != "1":
        as_postgres([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(lay["pg_port"]), "-U", "postgres", "airflow"])
    # Airflow as the official image runs it: no JDK (the provider needs none; the tripwire records a try).
    env = without_java({**os.environ, **airflow_env(lay)}, home / "no-java")
    no_jdk = hide_jdks_prefix()
    migrate = subprocess.run([*no_jdk, airflow, "db", "migrate"], env=env, capture_output=True, text=True)
    if migrate.returncode:
        raise StackError(f"airflow db migrate failed:\n{migrate.stderr[-3000:]}")
    for name in SERVICES:
        if _pid(home, name) is None:
            with open(home / "logs" / f"{name}.log", "ab") as out:
                proc = subprocess.Popen(
                    [*no_jdk, airflow, name],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=home,
                )
            (home / "run" / f"{name}.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 240
    last: object = None
    while time.monotonic() < deadline:
        for name in SERVICES:
            if _pid(home, name) is None:
                tail = (home / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]
                raise StackError(f"airflow {name} exited; tail of its log:\n{tail}")
        try:
            last = _health(lay["api_port"])
            states = [
                last.get(k, {}).get("status") for k in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            ]
            if all(s == "healthy" for s in states):
                print(
                    f"Airflow up: http://127.0.0.1:{lay['api_port']}/ (user {USER}, password in "
                    f"{home / 'passwords.json'})",
                    file=sys.stderr,
                )
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    raise StackError(f"Airflow services not healthy after 240s: {last}")


def _postgres_ids() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def down() -> None:
    lay = layout()
    home = Path(lay["home"])  # type: ignore[arg-type]
    for name in reversed(SERVICES):
        pid = _pid(home, name)
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 30
            while is_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if is_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        (home / "run" / f"{name}.pid").unlink(missing_ok=True)
    if (home / "pgdata" / "PG_VERSION").exists():
        as_postgres([pg_bin("pg_ctl"), "-D", str(home / "pgdata"), "-m", "fast", "-w", "stop"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "env"])
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.python)
        elif args.command == "down":
            down()
        else:
            for key, value in airflow_env(layout()).items():
                print(f"export {key}={shlex.quote(value)}")
    except StackError as exc:
        print(f"airflow stack {args.command} failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
