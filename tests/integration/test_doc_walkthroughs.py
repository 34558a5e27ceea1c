"""The docs' walk-throughs, run as a user pastes them (issue 39).

Each test reads a shell block out of its page (``tests/_docs.py``) and runs its lines, verbatim, in
one bash process in the checkout, so that ``eval``, ``export`` and shell variables carry from line
to line as in a terminal; then it checks what the page promises. What differs from a user's
terminal, and nothing else:

- the shell starts from this test process's environment without the open cluster's exports
  (``devcluster.py env``: the RM and WebHDFS addresses, ``HADOOP_CONF_DIR``, the connections, the
  ``PATH`` shim) and without ``make``'s own variables, so a block works only if its own ``eval``
  line points it at the cluster; ``TONY_DEVCLUSTER_HOME``/``_PORT_BASE``/``_JARS`` stay, since they
  say which cluster is this session's (a user's shell has devcluster's defaults);
- the ports a page names under devcluster's default base (19000) move to this session's base, as
  ``tests/e2e/test_readme_commands.py`` moves the README's;
- ``tony`` and ``python`` are the test's virtualenv's (first on ``PATH``): the venv a user
  installed the provider into with ``pip install .`` and activated.

What runs where, and what is not run as written:

- docs/cli.md: both lines as written (``tony submit`` of the example job on the open cluster).
- docs/devcluster.md: all three lines as written: a second, three-NodeManager cluster on the
  session's base + 700, torn down (and its home removed) afterwards.
- docs/quality-gate.md: the four set-up lines as written here; its two ``airflow dags test``
  lines run in ``test_airflow.py``'s nightly test (``two_nightly_days`` reads them from the page),
  which already spends minutes on the same two DAG runs: a second copy here would double that.
  There they run with that test's Airflow home and HDFS base path in place of the demo's, on a
  day whose day before it trained (the page's ``make demo`` runs in ``test_make_demo_as_written``).
- README.md's quick start: ``make demo`` as written, on this session's cluster (``make test`` is
  what CI runs).
- README.md/docs/index.md's install block: ``tony validate`` as written, with the ``tony`` that
  ``pip install --no-deps --no-build-isolation --target DIR .`` installed (the project's
  dependencies are the venv's already, and build isolation would download setuptools): the same
  wheel and console script ``pip install .`` installs, into a folder instead of the venv.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
import pytest

from tests._cluster import export_cluster_env
from tests._docs import REPO, block_commands, move_ports, session_port_base
from tests._util import get_json, rm_apps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

VENV_BIN = str(Path(sys.executable).parent)
#: The variables that say which cluster is this session's; a user's shell has devcluster's defaults.
SESSION_VARS = ("TONY_DEVCLUSTER_HOME", "TONY_DEVCLUSTER_PORT_BASE", "TONY_DEVCLUSTER_JARS")
ACTIVE = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"
DAGS_TZ = "Europe/Amsterdam"  # the example DAGs' timezone (dags/tony_nightly_retrain.py)


def user_env(**extra: str) -> dict[str, str]:
    """A user's shell in the checkout: this process's environment less the open cluster's exports
    and make's variables, with the virtualenv's ``bin`` first on ``PATH``."""
    exported = export_cluster_env()
    env = {
        k: v
        for k, v in os.environ.items()
        if (k not in exported or k in SESSION_VARS) and k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    }
    shim = exported["PATH"].split(":", 1)[0]
    path = [p for p in os.environ["PATH"].split(":") if p not in (shim, VENV_BIN)]
    env["PATH"] = ":".join([VENV_BIN, *path])
    return {**env, **extra}


@dataclass(frozen=True)
class Ran:
    """What one bash process made of a block: each line's exit code, the output, the shell's end state."""

    codes: list[int]
    output: str
    env: dict[str, str]  # the exported variables after the last line
    shell: dict[str, str]  # the shell variables the test asked for (exported or not)

    def assert_all_succeeded(self, lines: list[str]) -> None:
        assert len(self.codes) == len(lines), f"{len(self.codes)} of {len(lines)} lines ran:\n{self.output[-6000:]}"
        failed = [(line, code) for line, code in zip(lines, self.codes, strict=True) if code != 0]
        assert not failed, f"failed lines {failed}:\n{self.output[-6000:]}"


def run_block(
    lines: list[str],
    tmp_path: Path,
    env: dict[str, str],
    *,
    probe: tuple[str, ...] = (),
    shell_vars: tuple[str, ...] = (),
    timeout: float = 780,
) -> Ran:
    """``lines`` verbatim, one after the other in one bash process in the checkout, as pasted.

    After each line the script records ``$?`` (the lines themselves are not changed; a failing
    line does not stop the next, as in a terminal); after the last it writes the exported
    environment and ``shell_vars`` to files, after the test's own ``probe`` lines (which see the
    shell as the block left it). On a timeout the whole process group is killed, so
    nothing the block started outlives the test, and the test fails with the block's output:
    ``timeout`` stays under pytest's own (900 s, pyproject.toml), which would show nothing of it.
    """
    codes, state = tmp_path / "codes", tmp_path / "env"
    script = [f"{line}\n__doc_codes+=($?)" for line in lines]
    script.append(f'printf "%s\\n" "${{__doc_codes[@]}}" > {shlex.quote(str(codes))}')
    script += probe
    script.append(f"env -0 > {shlex.quote(str(state))}")
    for name in shell_vars:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), name
        script.append(f'printf "%s" "${{{name}-}}" > {shlex.quote(str(tmp_path / ("var." + name)))}')
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the block did not end within {timeout} s:\n{output[-6000:]}")
    found = [int(c) for c in codes.read_text().split()] if codes.exists() else []
    exported = dict(item.split("=", 1) for item in state.read_text().split("\0") if "=" in item)
    shell = {name: (tmp_path / ("var." + name)).read_text() for name in shell_vars}
    return Ran(found, output, exported, shell)


# --- README.md and docs/index.md: Installing --------------------------------------------------


def test_install_then_validate(tmp_path: Path) -> None:
    """``pip install .`` puts a ``tony`` on the PATH, and the README's ``tony validate`` line, run
    with it, checks the example job offline (exit 0, its two tasks named)."""
    lines = block_commands("README.md", "Installing")
    assert block_commands("docs/index.md", "Installing") == lines, "README and docs/index.md install alike"
    assert [line.split("#")[0].strip() for line in lines][:1] == ["pip install ."], lines
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    installed = subprocess.run(
        [*pip, "--target", str(target), "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (target / "bin" / "tony").is_file(), sorted(p.name for p in target.iterdir())
    # The rest of the block as written, with the installed `tony` first on PATH and its package first on sys.path.
    env = user_env(PYTHONPATH=str(target))
    env["PATH"] = f"{target / 'bin'}:{env['PATH']}"
    ran = run_block(lines[1:], tmp_path, env, probe=("__tony=$(command -v tony)",), shell_vars=("__tony",))
    ran.assert_all_succeeded(lines[1:])
    assert ran.shell["__tony"] == str(target / "bin" / "tony"), "the block ran another tony than the installed one"
    assert "dags/training/digits_mwms.yaml: valid offline; 2 tasks: worker:0, worker:1" in ran.output, ran.output


# --- docs/cli.md: Running a job without Airflow ------------------------------------------------

CLI_JOB_NAME = "digits-mwms-demo"  # dags/training/digits_mwms.yaml's name


@pytest.fixture
def cli_apps(cluster: Any) -> Iterator[None]:
    """The page's job carries no test tag (it runs as written): whatever of its name this test
    started and left running is killed afterwards, by id, and nothing that ran before it."""
    before = {a["id"] for a in rm_apps(cluster.rm_url) if a["name"] == CLI_JOB_NAME}
    yield
    left = [a["id"] for a in rm_apps(cluster.rm_url, states=ACTIVE) if a["name"] == CLI_JOB_NAME]
    mine = [app_id for app_id in left if app_id not in before]
    if mine:
        from airflow_provider_tony.yarn.client import TonyClient

        with TonyClient.from_env() as client:
            for app_id in mine:
                client.kill(app_id)


def test_cli_submit_of_the_example_job(cluster: Any, cli_apps: None, tmp_path: Path) -> None:
    """docs/cli.md's ``eval`` then ``tony submit dags/training/digits_mwms.yaml``: exit 0, and the
    application it followed succeeded on the open cluster with both workers."""
    lines = block_commands("docs/cli.md", "Running a job without Airflow")
    assert [line.split("#")[0].split()[:2] for line in lines] == [["eval", '"$(make'], ["tony", "submit"]], lines
    ran = run_block(lines, tmp_path, user_env())
    ran.assert_all_succeeded(lines)
    assert ran.env["TONY_RM_URL"] == cluster.rm_url, "the page's eval points at the running cluster"
    app_ids = re.findall(r"^(application_\d+_\d+)$", ran.output, re.M)
    assert app_ids, ran.output[-4000:]
    report = get_json(f"{cluster.rm_url}/ws/v1/cluster/apps/{app_ids[0]}")["app"]
    assert (report["name"], report["finalStatus"]) == (CLI_JOB_NAME, "SUCCEEDED"), report
    assert f"{app_ids[0]} SUCCEEDED" in ran.output, ran.output[-4000:]


# --- docs/devcluster.md: a multi-node cluster beside the default one ---------------------------

DEVCLUSTER_HEADING = "The local cluster (`devcluster/`)"


@dataclass(frozen=True)
class SecondCluster:
    home: Path
    port_base: int
    env: dict[str, str]  # devcluster's variables for it, for `down`


def _devcluster(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    script = str(REPO / "devcluster" / "devcluster.py")
    return subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def three_nm_cluster(cluster: Any) -> Iterator[SecondCluster]:
    """Where the page's cluster will run (its home and moved port base, read from the page's first
    line); refuses a home that is already in use, and brings the cluster down and removes the
    home afterwards, whatever the test did."""
    first = move_ports(block_commands("docs/devcluster.md", DEVCLUSTER_HEADING)[0])
    home_at = re.search(r"TONY_DEVCLUSTER_HOME=\$PWD/(\S+)", first)
    base_at = re.search(r"TONY_DEVCLUSTER_PORT_BASE=(\d+)", first)
    assert home_at and base_at, first
    home, base = REPO / home_at.group(1), int(base_at.group(1))
    assert base == session_port_base() + 700, first
    env = {
        **user_env(),
        "TONY_DEVCLUSTER_HOME": str(home),
        "TONY_DEVCLUSTER_PORT_BASE": str(base),
        "TONY_DEVCLUSTER_NODEMANAGERS": "3",
    }
    assert not home.exists(), f"{home} exists (a cluster of your own?): bring it down and remove it first"
    try:
        yield SecondCluster(home, base, env)
    finally:
        down = _devcluster(env, "down")
        shutil.rmtree(home, ignore_errors=True)
        assert down.returncode == 0, down.stderr[-4000:]


def test_a_three_nodemanager_cluster_beside_the_default_one(
    cluster: Any, three_nm_cluster: SecondCluster, tmp_path: Path
) -> None:
    """docs/devcluster.md's three lines: a second cluster in its own home on its own ports, from the
    default cluster's jar cache, whose env points at it: three NodeManagers running, the default
    cluster untouched."""
    lines = [move_ports(line) for line in block_commands("docs/devcluster.md", DEVCLUSTER_HEADING)]
    jars = REPO / ".devcluster" / "jars"
    assert "$PWD/.devcluster/jars" in lines[1] and jars.is_dir(), (
        f"the page reuses the jar cache in {jars}: `make cluster-up` fills it (or link it to yours)"
    )
    ran = run_block(lines, tmp_path, user_env(), timeout=600)
    ran.assert_all_succeeded(lines)
    assert Path(ran.env["TONY_DEVCLUSTER_HOME"]) == three_nm_cluster.home
    rm_url = ran.env["TONY_RM_URL"]
    assert rm_url != cluster.rm_url and rm_url.endswith(f":{three_nm_cluster.port_base + 88}"), rm_url
    nodes = get_json(f"{rm_url}/ws/v1/cluster/nodes")["nodes"]["node"]
    assert sorted(n["state"] for n in nodes) == ["RUNNING"] * 3, nodes
    assert get_json(f"{cluster.rm_url}/ws/v1/cluster/info")["clusterInfo"]["state"] == "STARTED"


# --- docs/quality-gate.md: the gate refusing a worse model -------------------------------------


def test_quality_gate_setup_lines(cluster: Any, tmp_path: Path) -> None:
    """docs/quality-gate.md's set-up lines as written (the cluster up, its env, the demo's Airflow
    home, the day): they leave the shell on the running cluster, with the demo's Airflow home and
    dags, the day after the demo's, and the ``.venv/bin/airflow`` the next lines run. Its two
    ``airflow dags test`` lines run in test_airflow.py's nightly test (see the module docstring)."""
    lines = block_commands("docs/quality-gate.md", "Quality gate")
    setup, runs = lines[:4], lines[4:]
    assert [line.split()[:3] for line in runs] == [[".venv/bin/airflow", "dags", "test"]] * 2, lines
    today = {pendulum.now(DAGS_TZ).to_date_string()}
    ran = run_block(setup, tmp_path, user_env(), shell_vars=("day",), timeout=300)
    today.add(pendulum.now(DAGS_TZ).to_date_string())  # the run may cross midnight
    ran.assert_all_succeeded(setup)
    assert ran.env["TONY_RM_URL"] == cluster.rm_url
    # make demo's Airflow home is the cluster home's airflow/ (scripts/demo.py); the page names the default home's.
    assert Path(ran.env["AIRFLOW_HOME"]) == REPO / ".devcluster" / "airflow"
    assert Path(ran.env["AIRFLOW__CORE__DAGS_FOLDER"]) == REPO / "dags"
    assert ran.env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    # make demo trains on yesterday's partition in the DAGs' timezone; the page's day is the next one, today.
    assert ran.shell["day"] in today, (ran.shell["day"], today)
    assert (REPO / ".venv" / "bin" / "airflow").is_file(), "the page's next lines run .venv/bin/airflow"


# --- README.md: Quick start's first command ----------------------------------------------------


def test_make_demo_as_written(cluster: Any, tmp_path: Path) -> None:
    """The README quick start's ``make demo``, as written, on this session's cluster (its home and
    ports are what a user's default ``.devcluster`` is): exit 0, the day's partition written, the
    retrain's DAG run ended, and its model on HDFS, published or (after an earlier demo on this
    cluster published a better one) kept aside by the gate, as the demo says."""
    lines = block_commands("README.md", "Quick start")
    demo = [line for line in lines if line.split("#")[0].strip() == "make demo"]
    assert demo, f"the README's quick start runs no `make demo`: {lines}"
    ran = run_block(demo, tmp_path, user_env())
    ran.assert_all_succeeded(demo)
    assert re.search(r"wrote \d+ records in \d+ files to \S+/data/digits/dt=", ran.output), ran.output[-4000:]
    model = re.search(r"\(path (\S+)\)", ran.output) or re.search(r"model is at (\S+)\. To publish", ran.output)
    assert model, ran.output[-4000:]
    from hdfs import InsecureClient

    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    assert hdfs.status(model.group(1), strict=False) is not None, f"{model.group(1)} is not on HDFS"
    assert "DAG run success" in ran.output or "the quality gate kept the model" in ran.output, ran.output[-4000:]
