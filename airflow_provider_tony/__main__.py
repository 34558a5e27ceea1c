"""Command line for running and debugging a TonY job outside Airflow.

    python -m airflow_provider_tony submit JOB.yaml   # follow to the end; exit 0 only on success
    python -m airflow_provider_tony status APP_ID     # the AM state document as JSON
    python -m airflow_provider_tony kill APP_ID

It goes through the same ``TonyClient`` the Airflow hook uses, and reads the
cluster from the environment that ``make -s cluster-env`` exports.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from airflow_provider_tony.runtime.errors import TonyError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.client import TonyClient


def load_job(path: str) -> JobSpec:
    """Read a JobSpec YAML; a relative role script that exists beside the file
    is made absolute, so a YAML next to its training script runs from anywhere."""
    base = Path(path).resolve().parent
    spec = JobSpec.from_yaml(Path(path).read_text())
    data = spec.to_dict()
    for role in data["roles"].values():
        script = role.get("script")
        if script and not script.startswith("/") and script not in data["files"] and (base / script).is_file():
            role["script"] = str((base / script).resolve())
    return JobSpec.from_dict(data)


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
    args = parser.parse_args(argv)
    try:
        with TonyClient.from_env() as client:
            if args.command == "submit":
                return _submit(client, args)
            if args.command == "status":
                doc = client.am_state(args.app_id)
                shown = doc.to_dict() if doc is not None else client.report(args.app_id).to_dict()
                print(json.dumps(shown, indent=2, sort_keys=True))
                return 0
            client.kill(args.app_id)
            print(f"killed {args.app_id}")
            return 0
    except (TonyError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
