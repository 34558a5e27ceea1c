"""The ``tony`` command: run, inspect and check TonY jobs outside Airflow.

    tony validate JOB.yaml [--cluster]   # offline checks; --cluster adds the cluster's limits
    tony submit JOB.yaml                 # submit and follow to the end; exit 0 only on success, 75 retryable
    tony status APP_ID [--html]          # the AM state document as JSON (or the job page), live or from HDFS
    tony logs APP_ID [--task worker:0]   # the containers' logs, from the NodeManagers
    tony kill APP_ID
    tony gc --max-age-days 30 [--keep-runs 5] [--dry-run]   # prune old runs, history, staged archives
    tony convert tony.xml [-o JOB.yaml]  # a TonY job configuration as a JobSpec YAML

``python -m airflow_provider_tony`` is the same command. It goes through the
same ``TonyClient`` as the Airflow hook, and finds the cluster in the
environment (``TONY_RM_URL`` or ``HADOOP_CONF_DIR``; for the local cluster
``eval "$(make -s cluster-env)"``).

Each subcommand is one small function registered with :func:`command`, so a
new one is a function and a decorator; :data:`COMMANDS` is the one list.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_provider_tony import __version__
from airflow_provider_tony.conclusion import Conclusion, conclude
from airflow_provider_tony.jobfile import read_job_file
from airflow_provider_tony.runtime.errors import ClusterUnreachable, InputMissing, JobFileError, SpecError, TonyError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.checks import validate_local_files
from airflow_provider_tony.yarn.logformat import shown
from airflow_provider_tony.yarn.source import paths_beside_job_file

if TYPE_CHECKING:
    from airflow_provider_tony.yarn.client import TonyClient

#: Exit codes, for cron, CI and other schedulers: the job failed for a reason a retry cannot
#: change (the training code's own failure, a container killed for its memory, a deadline);
#: bad input or the cluster refused the job (argparse uses 2 too); the job trained but its model
#: failed the quality gate (not published); a failure a later try may not meet (a lost node or
#: container, a preemption's last straw, a hung AM, the ResourceManager unreachable, a late
#: input): 75, sysexits.h's EX_TEMPFAIL, "try again later"; Ctrl-C.
EXIT_JOB_FAILED = 1
EXIT_ERROR = 2
EXIT_GATE_FAILED = 3
EXIT_RETRYABLE = 75
EXIT_INTERRUPTED = 130

Arguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it declares its arguments, and what it runs."""

    name: str
    summary: str
    arguments: Arguments
    run: Run


#: Every subcommand, in the order ``tony --help`` lists them.
COMMANDS: dict[str, Command] = {}


def command(name: str, summary: str, arguments: Arguments) -> Callable[[Run], Run]:
    """Register ``run`` as the subcommand ``name``; ``summary`` is its line in ``tony --help``."""

    def register(run: Run) -> Run:
        if name in COMMANDS:
            raise ValueError(f"subcommand {name!r} is registered twice")
        COMMANDS[name] = Command(name, summary, arguments, run)
        return run

    return register


def _client() -> TonyClient:
    # Imported here: `tony validate` and `tony --help` need no YARN client code.
    from airflow_provider_tony.yarn.client import TonyClient

    return TonyClient.from_env()


def load_job(path: str) -> JobSpec:
    """Read a JobSpec YAML; a relative ``src_dir`` is read from the file's folder,
    and (without ``src_dir``) a relative role script that exists beside the file
    is made absolute, so a YAML next to its training code runs from anywhere
    (``yarn.source.paths_beside_job_file``, which the operator uses too)."""
    data = read_job_file(path)
    return JobSpec.from_dict(paths_beside_job_file(data, Path(path).resolve().parent))


def _job_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "job",
        metavar="JOB.yaml",
        help="a JobSpec as YAML (reference: docs/jobspec.md); a relative role script is looked up beside the file",
    )


def _app_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app_id", metavar="APP_ID", help="the YARN application id, like application_1700000000000_0001")


# --------------------------------------------------------------------------- validate
def _validate_arguments(parser: argparse.ArgumentParser) -> None:
    _job_argument(parser)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="also check against the cluster's limits (maximum container size, queues, GPUs, node labels,"
        " total capacity); needs TONY_RM_URL or HADOOP_CONF_DIR",
    )
    parser.add_argument("--show", action="store_true", help="print the job as it will be submitted (normalised YAML)")


@command("validate", "check a JobSpec YAML without submitting it", _validate_arguments)
def validate(args: argparse.Namespace) -> int:
    """Offline: the model's own rules and the local files; ``--cluster``: the ResourceManager's limits too."""
    spec = load_job(args.job)
    if args.cluster:
        with _client() as client:
            client.validate(spec)
    else:
        validate_local_files(spec)
    if args.show:
        print(spec.to_yaml(), end="")
    where = "against the cluster" if args.cluster else "offline"
    print(f"{args.job}: valid {where}; {len(spec.task_ids())} tasks: {', '.join(spec.task_ids())}")
    return 0


# --------------------------------------------------------------------------- submit
def _submit_arguments(parser: argparse.ArgumentParser) -> None:
    _job_argument(parser)
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="an extra YARN application tag (repeatable), e.g. to find the application later",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between looks at the application while following it (default: 1)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="print the application id and return at once instead of following the job",
    )


@command("submit", "validate, submit and follow a JobSpec YAML; exit 0 only on success", _submit_arguments)
def submit(args: argparse.Namespace) -> int:
    spec = load_job(args.job)
    with _client() as client:
        app_id = client.submit(spec, extra_tags=args.tag)
        print(app_id, flush=True)
        if args.detach:
            return 0
        try:
            result = client.wait(
                app_id,
                poll_interval=args.poll_interval,
                startup_timeout=spec.startup_timeout,
                emit=lambda line: print(line, flush=True),
            )
        except KeyboardInterrupt:
            client.kill(app_id)
            print(f"interrupted: killed {app_id}", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"{app_id} {shown(result.final_status, 40)}: {shown(result.diagnostics, 16000)}", flush=True)
        return _concluded(conclude(client, spec, result))
    return 0


def _concluded(done: Conclusion) -> int:
    """The job's conclusion (``conclusion.py``: final cost, quality gate, history) said, as an exit code."""
    result = done.result
    if done.cost_error is not None:
        print(f"warning: no final cost for {result.app_id}: {done.cost_error}", file=sys.stderr, flush=True)
    if result.cost is not None:
        print(f"cost: {result.cost.line()}", flush=True)
    if not result.succeeded:
        return EXIT_RETRYABLE if result.retryable else EXIT_JOB_FAILED
    if done.undecided is not None:  # HDFS trouble: the model stays a candidate; an error, as before
        raise done.undecided
    if done.history_error is not None:
        print(f"warning: could not add the gate's verdict to the job's history: {done.history_error}", file=sys.stderr)
    if done.early_stopped is not None:
        print(f"{result.app_id} {done.early_stopped.line()} (no model: the quality gate was skipped)", flush=True)
    verdict = done.gate
    if verdict is None:
        return 0
    word = "passed: published" if verdict.passed else "FAILED: not published, kept"
    print(
        f"quality gate {word} at {verdict.model_dir} ({verdict.metric}: this run {verdict.value}, "
        f"published model {verdict.previous}): {verdict.reason}",
        flush=True,
    )
    return 0 if verdict.passed else EXIT_GATE_FAILED


# --------------------------------------------------------------------------- gc
def _gc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-age-days",
        type=float,
        metavar="DAYS",
        help="remove old runs' checkpoint folders, .damaged- copies, history files, staged src/ and envs/ "
        "archives and TensorBoard events folders (tensorboard/<app>) not used for this many days (the "
        "staging folders ~/.skein/<app> of ended applications go whatever their age)",
    )
    parser.add_argument(
        "--keep-runs",
        type=int,
        metavar="N",
        help="keep only the newest N runs' checkpoint folders of each task (the newest always stays)",
    )
    parser.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="HDFS_PATH",
        help="never remove this path or a folder holding it (repeatable); published models are kept anyway",
    )
    parser.add_argument(
        "--base-path",
        metavar="HDFS_PATH",
        help="the base path to prune (default: the client's, /user/<user>/tony; the operator's is the connection's)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed and remove nothing")


@command(
    "gc",
    "prune old runs' checkpoints, .damaged- copies, history files, staged archives and TensorBoard events "
    "folders under the base path",
    _gc_arguments,
)
def gc(args: argparse.Namespace) -> int:
    from airflow_provider_tony import retention

    try:
        policy = retention.Policy(max_age_days=args.max_age_days, keep_runs=args.keep_runs)
    except ValueError as exc:
        raise TonyError(str(exc)) from exc
    if not policy.active:
        raise TonyError("nothing to prune by: give --max-age-days and/or --keep-runs")
    with _client() as client:
        hdfs = client.webhdfs
        base = args.base_path or client.base_path
        # A running job appends to its events file without touching its folder's times: keep it whatever its age.
        apps = client.find_by_tags(())  # every running application of this provider's user, not only one DAG's
        running = [f"{base.rstrip('/')}/tensorboard/{app.app_id}" for app in apps]
        active = retention.active_folders(base, [getattr(app, "tags", []) for app in apps])
        # A staged file a running application localises stays: a container restarted elsewhere needs it again.
        found = [retention.read_references(hdfs, hdfs.resolve(f".skein/{app.app_id}")) for app in apps]
        referenced = None if None in found else set().union(*(f for f in found if f is not None))
        items = retention.scan(hdfs, base, protect=[*args.protect, *running], active=active, referenced=referenced)
        removals = retention.plan(items, policy, wall_now=time.time())
        for item, why in removals:
            print(f"{'would remove' if args.dry_run else 'removing'} {item.path}: {why}", flush=True)
        if not args.dry_run:
            retention.remove(hdfs, removals)
        # Staging folders of ended applications (~/.skein/<app>): per user, whatever the base path.
        max_age_s = args.max_age_days * 86400 if args.max_age_days is not None else None
        staged = client.ended_staging(max_age_s=max_age_s)
        for app_id, why in staged:
            print(f"{'would remove' if args.dry_run else 'removing'} ~/.skein/{app_id}: {why}", flush=True)
            if not args.dry_run:
                client.remove_staging(app_id)
    kept = len(items) - len(removals)
    print(f"{len(removals)} {'to remove' if args.dry_run else 'removed'}, {kept} kept under {base}")
    if staged:
        print(f"{len(staged)} staging folder(s) of ended applications {'to remove' if args.dry_run else 'removed'}")
    return 0


# --------------------------------------------------------------------------- status
def _status_arguments(parser: argparse.ArgumentParser) -> None:
    _app_argument(parser)
    parser.add_argument(
        "--html",
        action="store_true",
        help="print the job's page (tasks, progress, metric charts, events) as one HTML file, "
        "from its AM while it runs, else from the history it left on HDFS",
    )


@command(
    "status",
    "print the AM state document as JSON (YARN's report once the AM is gone; "
    "the final state from HDFS once YARN forgot it)",
    _status_arguments,
)
def status(args: argparse.Namespace) -> int:
    from airflow_provider_tony.runtime.page import render_page

    with _client() as client:
        if args.html:
            history = client.job_history(args.app_id)
            if history is None:
                raise TonyError(
                    f"no state or history for {args.app_id}: its AM does not serve it and "
                    f"{client.history_dir}/{args.app_id}.json is not on HDFS"
                )
            print(render_page(history, now_wall=time.time(), refresh_s=None))
            return 0
        doc = client.am_state(args.app_id)
        if doc is not None:
            as_dict = doc.to_dict()
        else:
            try:
                as_dict = client.report(args.app_id).to_dict()
            except TonyError:  # YARN has forgotten it: the final state the AM left on HDFS
                stored = client.stored_history(args.app_id)
                if stored is None or stored.state is None:
                    raise
                as_dict = stored.state.to_dict()
        print(json.dumps(as_dict, indent=2, sort_keys=True))
    return 0


# --------------------------------------------------------------------------- logs
def _logs_arguments(parser: argparse.ArgumentParser) -> None:
    _app_argument(parser)
    parser.add_argument(
        "--task",
        metavar="TASK_ID",
        help="only this task's container, like worker:0 (needs the AM state, so a running application)",
    )
    parser.add_argument(
        "--file",
        metavar="NAME",
        help="only this log file, like worker.log (skein writes a service's stdout and stderr to <service>.log)",
    )


@command("logs", "print an application's container logs as the NodeManagers serve them", _logs_arguments)
def logs(args: argparse.Namespace) -> int:
    with _client() as client:
        containers = client.application_containers(args.app_id)
        doc = client.am_state(args.app_id)
        names = {t.container_id: task_id for task_id, t in (doc.tasks if doc is not None else {}).items()}
        if args.task:
            if args.task not in names.values():
                known = ", ".join(sorted(names.values())) or "none: the AM state is gone once the application ends"
                raise TonyError(
                    f"--task {args.task!r} is not a task of {args.app_id} (known: {known});"
                    " leave --task out to print every container"
                )
            containers = [(cid, host) for cid, host in containers if names.get(cid) == args.task]
        if not containers:
            print(
                f"no container logs on the NodeManagers for {args.app_id}; once aggregated, read them with"
                f" `yarn logs -applicationId {args.app_id}`",
                file=sys.stderr,
            )
            return EXIT_ERROR
        for cid, host in containers:
            for name, text in sorted(client.container_logs(cid, host).items()):
                if args.file and name != args.file:
                    continue
                label = f"{shown(names[cid], 100)} " if cid in names else ""
                print(f"==== {label}{shown(cid, 100)} on {shown(host, 255)}: {shown(name, 255)} ====")
                # The training code wrote these: no terminal escapes or other control characters
                # reach the terminal (tabs stay, lines stay lines).
                for line in text.splitlines():
                    print(shown(line, len(line), tabs=True))
    return 0


# --------------------------------------------------------------------------- kill
@command("kill", "kill an application", _app_argument)
def kill(args: argparse.Namespace) -> int:
    with _client() as client:
        client.kill(args.app_id)
    print(f"killed {args.app_id}")
    return 0


# --------------------------------------------------------------------------- entry point
# --------------------------------------------------------------------------- convert
def _convert_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("xml", metavar="tony.xml", help="a TonY job configuration (tony.xml)")
    parser.add_argument("-o", "--output", help="write the JobSpec YAML here instead of standard output")
    for flag in ("executes", "task_params", "src_dir", "python_venv", "python_binary_path"):
        parser.add_argument(f"--{flag}", help=f"the value of TonY's --{flag} command-line option, if the job used it")


@command(
    "convert",
    "turn a TonY configuration (tony.xml) into a JobSpec YAML; unmapped keys go to stderr",
    _convert_arguments,
)
def convert(args: argparse.Namespace) -> int:
    """Exit 1 when the converted job is still incomplete (for example no command without ``--executes``)."""
    from airflow_provider_tony.tony_xml import convert_tony_xml, to_yaml

    job, unmapped = convert_tony_xml(
        args.xml,
        executes=args.executes,
        task_params=args.task_params,
        src_dir=args.src_dir,
        python_venv=args.python_venv,
        python_binary_path=args.python_binary_path,
    )
    text = to_yaml(job, unmapped)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    for key, why in unmapped:
        print(f"not converted: {shown(key)}: {shown(why)}", file=sys.stderr)
    try:
        JobSpec.from_dict(job)
    except SpecError as exc:  # still written: the user completes it
        print(f"warning: the converted job is not complete yet: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser(prog: str = "tony") -> argparse.ArgumentParser:
    """The parser for every registered subcommand (separate from ``main`` so tests can read it)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run, inspect and check TonY jobs (distributed TensorFlow on YARN) outside Airflow.",
        epilog="The cluster comes from TONY_RM_URL or HADOOP_CONF_DIR (WebHDFS: TONY_WEBHDFS_URL).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS.values():
        cmd.arguments(sub.add_parser(cmd.name, help=cmd.summary, description=cmd.summary))
    return parser


def main(argv: list[str] | None = None, prog: str = "tony") -> int:
    """Run one subcommand; the exit code is 0 or one of the ``EXIT_`` codes above (``exit_code_of``)."""
    args = build_parser(prog).parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except (TonyError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code_of(exc)


def exit_code_of(exc: BaseException) -> int:
    """The exit code of an error raised before or around a job: 75 where asking again may work.

    The ResourceManager not answering (down, restarting, failing over) and a
    missing input the job marks ``retryable_if_missing`` (a late partition) are
    worth another try later; anything else is bad input or a refusal (2).
    """
    if isinstance(exc, ClusterUnreachable) or (isinstance(exc, InputMissing) and exc.retryable):
        return EXIT_RETRYABLE
    return EXIT_ERROR


__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_GATE_FAILED",
    "EXIT_JOB_FAILED",
    "EXIT_RETRYABLE",
    "Command",
    "JobFileError",
    "build_parser",
    "command",
    "exit_code_of",
    "load_job",
    "main",
    "read_job_file",
]

if __name__ == "__main__":
    sys.exit(main())
