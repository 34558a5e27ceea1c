"""The ``tony`` command's parsing and its offline ``validate`` (no cluster, no YARN client)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from airflow_provider_tony import __version__, cli
from tests.unit.support.paths import REPO

EXAMPLE = REPO / "dags" / "training" / "digits_mwms.yaml"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_is_registered() -> None:
    assert {"submit", "status", "kill", "logs", "validate"} <= set(cli.COMMANDS)
    assert set(_subparsers(cli.build_parser())) == set(cli.COMMANDS)


def test_every_argument_has_help() -> None:
    parser = cli.build_parser()
    missing = [
        f"{name} {action.dest}"
        for name, sub in _subparsers(parser).items()
        for action in sub._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert missing == []
    assert all(cmd.summary for cmd in cli.COMMANDS.values())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["submit", "job.yaml"], {"job": "job.yaml", "tag": [], "poll_interval": 1.0, "detach": False}),
        (
            ["submit", "job.yaml", "--tag", "a", "--tag", "b", "--poll-interval", "2.5", "--detach"],
            {"tag": ["a", "b"], "poll_interval": 2.5, "detach": True},
        ),
        (["status", "application_1_0001"], {"app_id": "application_1_0001"}),
        (["kill", "application_1_0001"], {"app_id": "application_1_0001"}),
        (
            ["logs", "application_1_0001", "--task", "worker:1", "--file", "worker.log"],
            {"app_id": "application_1_0001", "task": "worker:1", "file": "worker.log"},
        ),
        (["validate", "job.yaml"], {"job": "job.yaml", "cluster": False, "show": False}),
        (["validate", "job.yaml", "--cluster", "--show"], {"cluster": True, "show": True}),
    ],
)
def test_parses(argv: list[str], expected: dict[str, object]) -> None:
    args = vars(cli.build_parser().parse_args(argv))
    assert args["command"] == argv[0]
    assert {k: args[k] for k in expected} == expected


@pytest.mark.parametrize(
    "argv", [[], ["submit"], ["status"], ["submit", "j.yaml", "--poll-interval", "soon"], ["frobnicate"]]
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert "usage: tony" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"tony {__version__}"


def test_command_registry_refuses_a_second_registration() -> None:
    with pytest.raises(ValueError, match="'status' is registered twice"):
        cli.command("status", "again", lambda parser: None)(lambda args: 0)


def test_validate_accepts_the_example_offline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_client", lambda: pytest.fail("offline validate must not reach the cluster"))
    assert cli.main(["validate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "valid offline; 2 tasks: worker:0, worker:1" in out


def test_validate_show_prints_the_normalised_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", str(EXAMPLE), "--show"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out.split("\n" + str(EXAMPLE))[0])
    assert shown["roles"]["worker"]["memory"] == 1024  # "1 GiB" normalised to MiB
    assert shown["roles"]["worker"]["script"] == str(EXAMPLE.parent / "digits_mwms.py")  # resolved beside the YAML


def _job(tmp_path: Path, **role: object) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"roles": {"worker": {"script": "/bin/true.py", **role}}}))
    return path


@pytest.mark.parametrize(
    ("role", "field", "fix"),
    [
        ({"memory": "lots"}, "roles.worker.memory", "'2 GiB'"),
        ({"instances": 0}, "roles.worker.instances", "at least 1 instance"),
        ({"memroy": "1g"}, "roles.worker.memroy", "known keys are"),
        ({}, "roles.worker.script", "file not found on this machine"),  # local files are checked offline too
    ],
)
def test_validate_names_the_field_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], role: dict[str, object], field: str, fix: str
) -> None:
    assert cli.main(["validate", str(_job(tmp_path, **role))]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and fix in err


def test_validate_of_a_missing_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", str(tmp_path / "nope.yaml")]) == cli.EXIT_ERROR
    assert "nope.yaml" in capsys.readouterr().err


def test_python_dash_m_is_the_same_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_provider_tony", "validate", str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "valid offline" in proc.stdout
    usage = subprocess.run([sys.executable, "-m", "airflow_provider_tony", "--help"], capture_output=True, text=True)
    assert usage.stdout.startswith("usage: python -m airflow_provider_tony")


# One shape of broken job file each: (file content, where the error points, words it must say).
MALFORMED = {
    "yaml-syntax": (b"name: x\n- item\n", ":2:1: ", "not valid YAML"),
    "unclosed-brace": (b"name: x\nroles: {worker: {script: a.py}\n", ":3:1: ", "flow mapping"),
    "not-a-mapping": (b"# a list\n- a\n- b\n", ":2:1: ", "holds a list, not a JobSpec mapping"),
    "scalar": (b"just words\n", ":1:1: ", "holds a str, not a JobSpec mapping"),
    "empty": (b"", ": holds no job", "give a JobSpec mapping"),
    "only-comments": (b"# nothing yet\n", ": holds no job", "give a JobSpec mapping"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00", ":1:1: ", "not UTF-8 text (byte 0x89)"),
    "nul-byte": (b"name: x\nroles:\x00\n", ":2:7: ", "not a text file: character #x0000"),
    "jinja-expression": (b"name: x\nroles:\n  worker:\n    instances: {{ params.workers }}\n", ":4:", "Jinja"),
    "jinja-statement": (b"name: x\n{% if params.gpu %}\nroles: {}\n{% endif %}\n", ":2:2: ", "Jinja"),
}


@pytest.mark.parametrize("subcommand", ["validate", "submit"])
@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_a_malformed_job_file_is_one_line_with_file_and_position_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, subcommand: str, shape: str
) -> None:
    """Before, a YAML syntax error ended `tony submit` in a yaml.parser.ParserError traceback."""
    content, where, words = MALFORMED[shape]
    path = tmp_path / "job.yaml"
    path.write_bytes(content)

    def no_cluster() -> None:
        raise AssertionError("a malformed job file must be refused before the cluster is contacted")

    monkeypatch.setattr(cli, "_client", no_cluster)
    assert cli.main([subcommand, str(path)]) == cli.EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"error: {path}{where}"), lines[0]
    assert words in lines[0], lines[0]


def test_a_yaml_syntax_error_is_no_traceback_from_the_installed_command(tmp_path: Path) -> None:
    """The same through a real process: exit 2 and one line, whatever catches what inside."""
    path = tmp_path / "job.yaml"
    path.write_text("name: x\nroles: {worker: {script: a.py}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_provider_tony", "submit", str(path)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "TONY_RM_URL": "http://127.0.0.1:9"},
    )
    assert proc.returncode == cli.EXIT_ERROR, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {path}:3:1: not valid YAML"), proc.stderr


# --------------------------------------------------------------------------- #
# tony submit's exit code: what cron, CI and other schedulers read
# --------------------------------------------------------------------------- #
class _EndsWith:
    """A stand-in client whose job ends with ``result`` (or whose submit raises ``error``)."""

    def __init__(self, result: object = None, error: Exception | None = None) -> None:
        self.result, self.error = result, error

    def submit(self, spec: object, extra_tags: object = ()) -> str:
        if self.error is not None:
            raise self.error
        return "application_1_0001"

    def wait(self, app_id: str, **kwargs: object) -> object:
        return self.result

    def final_cost(self, app_id: str) -> None:
        return None

    def __enter__(self) -> _EndsWith:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _ended(kind: str, retryable: bool) -> object:
    from airflow_provider_tony.runtime.messages import Failure
    from airflow_provider_tony.yarn.follower import JobResult

    failure = Failure(kind=kind, retryable=retryable, task_id="worker:1", message=f"worker:1 {kind}")
    return JobResult("application_1_0001", "FINISHED", "FAILED", f"worker:1 {kind}", None, None, failure=failure)


@pytest.mark.parametrize(
    ("kind", "retryable", "code"),
    [("lost", True, 75), ("hung_am", True, 75), ("code", False, 1), ("out_of_memory", False, 1)],
)
def test_submit_exits_75_for_a_retryable_failure_and_1_for_a_final_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, retryable: bool, code: int
) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    monkeypatch.setattr(cli, "_client", lambda: _EndsWith(_ended(kind, retryable)))
    assert cli.main(["submit", str(_job(tmp_path, script=str(script)))]) == code
    assert (cli.EXIT_RETRYABLE, cli.EXIT_JOB_FAILED, cli.EXIT_ERROR, cli.EXIT_GATE_FAILED) == (75, 1, 2, 3)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("unreachable", 75),
        ("late input", 75),
        ("missing input, not retryable", 2),
        ("refused", 2),
    ],
)
def test_errors_before_the_job_exit_75_only_where_asking_again_may_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: str, code: int
) -> None:
    from airflow_provider_tony.runtime.errors import ClusterUnreachable, InputMissing, SpecError

    raised = {
        "unreachable": ClusterUnreachable("the ResourceManager at http://rm:8088 did not answer"),
        "late input": InputMissing("inputs.day", "/data/dt=1", "no such folder", retryable=True),
        "missing input, not retryable": InputMissing("inputs.day", "/data/dt=1", "no such folder", retryable=False),
        "refused": SpecError("roles.worker.memory", "above the cluster's maximum"),
    }[error]
    script = tmp_path / "train.py"
    script.write_text("")
    monkeypatch.setattr(cli, "_client", lambda: _EndsWith(error=raised))
    assert cli.main(["submit", str(_job(tmp_path, script=str(script)))]) == code


def test_gc_takes_repeated_protect_paths() -> None:
    """Each --protect adds a path: the last one must not replace the others (a wrong prune is not undone)."""
    args = cli.build_parser().parse_args(["gc", "--protect", "/a", "--protect", "/b", "--max-age-days", "1.5"])
    assert (args.protect, args.max_age_days, args.keep_runs, args.dry_run) == (["/a", "/b"], 1.5, None, False)
    assert cli.build_parser().parse_args(["gc", "--keep-runs", "3"]).protect == []


def test_gc_help_names_each_option_s_unit_and_what_it_removes_or_keeps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tony gc --help`` is its manual: a command that deletes says in each option's line what goes and what stays."""
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: the phrases are not split by wrapping
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["gc", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # each option with its unit, the start of its line, and the key facts (not every word: the wording may improve)
    for phrase in (
        "--max-age-days DAYS remove old runs' checkpoint folders",
        "TensorBoard events folders (tensorboard/<app>)",
        "~/.skein/<app> of ended applications go whatever their age",
        "--keep-runs N keep only the newest N runs' checkpoint folders",
        "(the newest always stays)",
        "--protect HDFS_PATH never remove this path",
        "published models are kept anyway",
        "--base-path HDFS_PATH the base path to prune",
        "/user/<user>/tony",
        "--dry-run list what would be removed and remove nothing",
    ):
        assert phrase in out, phrase
    assert out.endswith("remove nothing")
