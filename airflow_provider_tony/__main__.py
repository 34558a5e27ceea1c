"""Command line for running and debugging a TonY job outside Airflow.

    python -m airflow_provider_tony submit JOB.yaml   # follow to the end; exit 0 only on success
    python -m airflow_provider_tony status APP_ID     # the AM state document as JSON
    python -m airflow_provider_tony kill APP_ID
    python -m airflow_provider_tony convert tony.xml [-o job.yaml]   # a TonY job as a JobSpec YAML

It goes through the same ``TonyClient`` the Airflow hook uses, and reads the
cluster from the environment that ``make -s cluster-env`` exports.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from airflow_provider_tony.runtime.errors import SpecError, TonyError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.client import TonyClient


def load_job(path: str) -> JobSpec:
    """Read a JobSpec YAML; a relative ``src_dir`` is read from the file's folder,
    and (without ``src_dir``) a relative role script that exists beside the file
    is made absolute, so a YAML next to its training code runs from anywhere."""
    base = Path(path).resolve().parent
    data = yaml.safe_load(Path(path).read_text())
    src_dir = data.get("src_dir") if isinstance(data, dict) else None
    if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")):
        data["src_dir"] = str((base / src_dir).resolve())
    spec = JobSpec.from_dict(data)
    if spec.src_dir is not None:
        return spec  # scripts are relative to the source tree
    data = spec.to_dict()
    for role in data["roles"].values():
        script = role.get("script")
        if script and not script.startswith("/") and script not in data["files"] and (base / script).is_file():
            role["script"] = str((base / script).resolve())
    return JobSpec.from_dict(data)


def _convert(args: argparse.Namespace) -> int:
    """``convert``: a TonY configuration to a JobSpec YAML; unmapped keys go to stderr."""
    from airflow_provider_tony.tony_xml import convert_tony_xml, to_yaml  # noqa: PLC0415

    job, unmapped = convert_tony_xml(args.xml, executes=args.executes, task_params=args.task_params,
                                     src_dir=args.src_dir, python_venv=args.python_venv,
                                     python_binary_path=args.python_binary_path)
    text = to_yaml(job, unmapped)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    for key, why in unmapped:
        print(f"not converted: {key}: {why}", file=sys.stderr)
    try:
        JobSpec.from_dict(job)
    except SpecError as exc:  # still written: the user completes it (e.g. the command, with --executes)
        print(f"warning: the converted job is not complete yet: {exc}", file=sys.stderr)
        return 1
    return 0


def _submit(client: TonyClient, args: argparse.Namespace) -> int:
    spec = load_job(args.job)
    app_id = client.submit(spec, extra_tags=args.tag)
    print(app_id, flush=True)
    try:
        result = client.wait(app_id, poll_interval=args.poll_interval, startup_timeout=spec.startup_timeout,
                             emit=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        client.kill(app_id)
        print(f"interrupted: killed {app_id}", file=sys.stderr)
        return 130
    print(f"{app_id} {result.final_status}: {result.diagnostics}", flush=True)
    return 0 if result.succeeded else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_tony", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_submit = sub.add_parser("submit", help="submit a JobSpec YAML and follow it")
    p_submit.add_argument("job")
    p_submit.add_argument("--tag", action="append", default=[], help="extra YARN application tag")
    p_submit.add_argument("--poll-interval", type=float, default=1.0)
    p_status = sub.add_parser("status", help="print the AM state document")
    p_status.add_argument("app_id")
    p_kill = sub.add_parser("kill", help="kill an application")
    p_kill.add_argument("app_id")
    p_convert = sub.add_parser("convert", help="turn a TonY tony.xml into a JobSpec YAML")
    p_convert.add_argument("xml")
    p_convert.add_argument("-o", "--output", help="write the YAML here instead of stdout")
    for flag in ("executes", "task_params", "src_dir", "python_venv", "python_binary_path"):
        p_convert.add_argument(f"--{flag}", help=f"TonY's --{flag} option, if the job used it")
    args = parser.parse_args(argv)
    try:
        if args.command == "convert":
            return _convert(args)
        with TonyClient.from_env() as client:
            if args.command == "submit":
                return _submit(client, args)
            if args.command == "status":
                doc = client.am_state(args.app_id)
                print(json.dumps(doc if doc is not None else client.report(args.app_id), indent=2, sort_keys=True))
                return 0
            client.kill(args.app_id)
            print(f"killed {args.app_id}")
            return 0
    except (TonyError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
