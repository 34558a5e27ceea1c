"""TonY jobs as they are: a ``tony.xml`` (plus TonY's command-line options) as a JobSpec.

Why: a TonY user's job should move over without being rewritten by hand.
:func:`convert_tony_xml` maps every TonY key that has a counterpart here and
returns the others with the reason they were left out, so nothing is dropped
silently. Key names are TonY's own (``TonyConfigurationKeys``); per-role keys
are ``tony.<jobtype>.<attribute>`` with job types found, as TonY finds them,
from the ``tony.<jobtype>.instances`` keys.

TonY's defaults apply where the file is silent (2 GiB and 1 vcore a task,
``ps`` untracked). The task executors here also export TonY's variables
(``JOB_NAME``, ``TASK_INDEX``, ``CLUSTER_SPEC``...), so the scripts themselves
run unchanged. No Airflow import: the CLI and DAG files both use this.
"""

from __future__ import annotations

import os
import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import ARCHIVE_SUFFIXES, JobSpec
from airflow_provider_tony.yarn.logformat import shown

__all__ = ["convert_tony_xml", "job_from_tony_xml", "read_tony_xml", "to_yaml"]

Unmapped = list[tuple[str, str]]

_INSTANCES = re.compile(r"^tony\.([a-z]+)\.instances$")
_TONY_TASK_DEFAULTS = {"memory": "2g", "vcores": 1, "gpus": 0}  # tony-default.xml
_PYTHON = re.compile(r"^(.*/)?python[0-9.]*$")
_SHELL = re.compile(r"[|&;<>`$(){}*?]")

# Keys with nothing to map to, by prefix, and why.
_NO_COUNTERPART = (
    (
        "tony.docker.",
        (
            "Docker containers are not supported: tasks run in the node's own environment or a"
            " shipped python archive (python.archive)"
        ),
    ),
    ("tony.history.", "TonY's history server; this provider reports through Airflow and the YARN UI"),
    ("tony.portal.", "TonY's portal; this provider reports through Airflow and the YARN UI"),
    ("tony.https.", "TonY's portal; this provider reports through Airflow and the YARN UI"),
    ("tony.http.", "TonY's portal; this provider reports through Airflow and the YARN UI"),
    ("tony.secret.", "TonY's portal; this provider reports through Airflow and the YARN UI"),
    ("tony.keytab.", "Kerberos comes from the Airflow connection (principal and keytab), not the job"),
    ("tony.application.security.", "Kerberos comes from the Airflow connection, not the job"),
    ("tony.version-info.", "build metadata of TonY itself"),
    ("tony.horovod.", "only TensorFlow jobs run here"),
    ("tony.task.max-total-", "cluster-wide quotas are the YARN queue's business here"),
    ("tony.application.hadoop.", "containers get the cluster's Hadoop classpath from YARN"),
    ("tony.application.hdfs-conf-path", "the Hadoop configuration comes from the Airflow connection"),
    ("tony.application.yarn-conf-path", "the Hadoop configuration comes from the Airflow connection"),
    ("tony.application.mapred-conf-path", "the Hadoop configuration comes from the Airflow connection"),
    ("tony.other.namenodes", "delegation tokens for other name nodes are not fetched; see the Kerberos section"),
    ("tony.gpu-exec-path", "GPUs are found with nvidia-smi on the node's PATH"),
    ("tony.task.am.jvm.opts", "the application master here is skein's and a Python process"),
    ("tony.task.executor.jvm.opts", "task executors here are Python processes, not JVMs"),
    ("tony.task.default.jvm.opts", "task executors here are Python processes, not JVMs"),
    ("tony.task.metrics-interval-ms", "progress is reported by the script (runtime.progress), not sampled"),
    ("tony.task.gpu-metrics.", "GPU metrics are not sampled"),
    (
        "tony.am.retry-count",
        ("the application master is not retried: Airflow retries the task, resuming from the checkpoint"),
    ),
    ("tony.am.wait-client-signal-stop-timeout-sec", "the AM keeps its final state until a client reads it"),
    ("tony.application.num-client-rm-connect-retries", "the client's ResourceManager retries are its own"),
    ("tony.application.type", "the YARN application type is skein's"),
    ("tony.application.enable-preprocess", "no preprocessing stage: run it as an Airflow task before this one"),
    ("tony.application.prepare-stage", "no preprocessing stage: run it as an Airflow task before this one"),
    ("tony.application.training-stage", "no preprocessing stage: run it as an Airflow task before this one"),
    ("tony.application.placement-spec", "placement constraints are not supported"),
    ("tony.containers.placement-spec", "placement constraints are not supported"),
    ("tony.containers.allocation-tags", "placement constraints are not supported"),
    ("tony.container.allocation.timeout", "use startup_timeout (the whole application's wait for YARN)"),
    ("tony.task.executor.execution-timeout-ms", "use deadline (the whole job's limit)"),
    ("tony.task.executor.execution.error-message-max-depth", "failures carry the last 20 lines of stderr"),
)
_ROLE_UNMAPPED = {
    "max-instances": "instances are fixed per job here",
    "depends-on": "roles start together (GANG); order work with Airflow tasks instead",
    "placement-spec": "placement constraints are not supported",
    "allocation-tags": "placement constraints are not supported",
    "jvm.opts": "task executors here are Python processes, not JVMs",
}


def read_tony_xml(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``name -> value`` pairs of a Hadoop-style configuration file."""
    try:
        root = ET.parse(path).getroot()  # noqa: S314 - the user's own local tony.xml, not network input
    except (OSError, ET.ParseError) as exc:
        raise SpecError(
            "tony_xml",
            f"{str(path)!r} could not be read as a Hadoop configuration file ({exc}); give the path of a tony.xml",
        ) from exc
    conf: dict[str, str] = {}
    for prop in root.iter("property"):
        name = (prop.findtext("name") or "").strip()
        if name:
            conf[name] = (prop.findtext("value") or "").strip()
    return conf


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SpecError(key, f"{value!r} is not an integer; fix the value in the TonY configuration") from None


def _memory(value: str) -> int | str:
    """TonY reads a bare number as MiB, like this provider; ``2g``/``512m`` pass through."""
    return int(value) if value.isdigit() else value


def _env_pairs(key: str, values: list[str], unmapped: Unmapped) -> dict[str, str]:
    env = {}
    for pair in values:
        name, sep, val = pair.partition("=")
        if not sep or not name.strip():
            unmapped.append((key, f"{pair!r} is not NAME=value"))
            continue
        env[name.strip()] = val.strip()
    return env


def _program(command: str, python: str | None) -> dict[str, Any]:
    """A TonY command line as a role's program: script, module or plain command (never a shell).

    TonY runs ``python train.py --steps 10`` through a shell; a command that
    needs one (pipes, ``&&``, variables) becomes ``bash -c`` with the text as is.
    """
    if _SHELL.search(command):
        return {"command": ["bash", "-c", command]}
    words = shlex.split(command)
    if words and (_PYTHON.match(words[0]) or (python and words[0] == python)):
        if len(words) >= 3 and words[1] == "-m":
            return {"module": words[2], "args": words[3:]}
        if len(words) >= 2 and words[1].endswith(".py"):
            return {"script": words[1], "args": words[2:]}
    if words and words[0].endswith(".py"):
        return {"script": words[0], "args": words[1:]}
    return {"command": words}


def _files(key: str, value: str, unmapped: Unmapped) -> dict[str, str]:
    """``tony.<jobtype>.resources``: comma-separated paths shipped into the working directory."""
    files = {}
    for item in _list(value):
        if item.endswith("#archive"):
            unmapped.append((key, f"{item!r}: archives are shipped as src_dir or python.archive here"))
        elif item.startswith(("/", "hdfs://")) and not item.endswith("/"):
            files[item.rstrip("/").rsplit("/", 1)[-1]] = item
        else:
            unmapped.append((key, f"{item!r}: give an absolute local path or an hdfs:// URL of a single file"))
    return files


def convert_tony_xml(
    path: str | os.PathLike[str],
    *,
    executes: str | None = None,
    task_params: str | None = None,
    src_dir: str | None = None,
    python_venv: str | None = None,
    python_binary_path: str | None = None,
) -> tuple[dict[str, Any], Unmapped]:
    """``(job, unmapped)``: a JobSpec dict and every ``(key, why)`` that has no counterpart.

    The keyword arguments are TonY's command-line options of the same names
    (``--executes``, ``--task_params``...), since TonY jobs often set those on
    the command line rather than in the file.
    """
    conf = read_tony_xml(path)
    unmapped: Unmapped = []
    job: dict[str, Any] = {}
    used: set[str] = set()

    def take(key: str) -> str | None:
        if key in conf:
            used.add(key)
            return conf[key]
        return None

    if (v := take("tony.application.name")) is not None:
        job["name"] = v
    if (v := take("tony.yarn.queue")) is not None:
        job["queue"] = v
    if (v := take("tony.application.tags")) is not None:
        job["tags"] = _list(v)
    if (v := take("tony.application.timeout")) is not None and _int("tony.application.timeout", v) > 0:
        job["deadline"] = _int("tony.application.timeout", v) / 1000
    if (v := take("tony.am.startup-timeout")) is not None and _int("tony.am.startup-timeout", v) > 0:
        job["startup_timeout"] = _int("tony.am.startup-timeout", v) / 1000
    if (v := take("tony.task.executor.registry-timeout-sec")) is not None and _int(
        "tony.task.executor.registry-timeout-sec", v
    ) > 0:
        job["registration_timeout"] = _int("tony.task.executor.registry-timeout-sec", v)
    interval = take("tony.task.heartbeat-interval-ms")
    misses = take("tony.task.max-missed-heartbeats")
    if interval is not None or misses is not None:
        beat = _int("tony.task.heartbeat-interval-ms", interval or "1000") / 1000
        job["heartbeat_interval"] = beat
        job["heartbeat_timeout"] = beat * _int("tony.task.max-missed-heartbeats", misses or "25")
    if (v := take("tony.am.memory")) is not None:
        job["am_memory"] = _memory(v)
    if (v := take("tony.am.vcores")) is not None:
        job["am_vcores"] = _int("tony.am.vcores", v)
    if (v := take("tony.am.gpus")) is not None and v not in ("", "0"):
        unmapped.append(("tony.am.gpus", "the application master does no training and gets no GPUs here"))
    if (v := take("tony.application.node-label")) is not None and v:
        unmapped.append(
            (
                "tony.application.node-label",
                (
                    "the application master's node label is not set here;"
                    " per-role node labels (tony.<jobtype>.node-label) are"
                ),
            )
        )
    if (v := take("tony.application.framework")) is not None and v.lower() != "tensorflow":
        unmapped.append(("tony.application.framework", f"{v!r}: only TensorFlow jobs run here"))
    if (v := take("tony.application.distributed-mode")) is not None and v.upper() != "GANG":
        unmapped.append(("tony.application.distributed-mode", f"{v!r}: tasks always start together (GANG) here"))
    if (v := take("tony.application.fail-on-worker-failure-enabled")) is not None and v.lower() != "true":
        unmapped.append(
            (
                "tony.application.fail-on-worker-failure-enabled",
                "any tracked task's failure fails the job here (as TonY with this set to true)",
            )
        )

    env: dict[str, str] = {}
    for key in ("tony.containers.envs", "tony.execution.envs"):
        if (v := take(key)) is not None:
            env.update(_env_pairs(key, _list(v), unmapped))
    python = take("tony.python-exec-path")

    # Python: TonY's --python_venv zip is unpacked as venv/, its --python_binary_path relative to that.
    if python_venv:
        job["python"] = {
            "archive": str(Path(python_venv).resolve()) if not python_venv.startswith("hdfs://") else python_venv
        }
        if python_binary_path and python_binary_path.lstrip("./") not in ("bin/python", "bin/python3"):
            unmapped.append(
                (
                    "--python_binary_path",
                    (
                        f"{python_binary_path!r}: a python archive here must hold"
                        " bin/python at its root (as venv-pack and conda-pack make it); repack the venv"
                    ),
                )
            )
        if not python_venv.endswith(ARCHIVE_SUFFIXES):
            unmapped.append(("--python_venv", f"{python_venv!r} is not a .zip/.tar.gz/.tgz archive"))
    elif python_binary_path or python:
        interpreter = python_binary_path or python or ""
        if interpreter.startswith("/"):
            job["python"] = {"interpreter": interpreter}
        else:
            unmapped.append(
                (
                    "--python_binary_path",
                    (
                        f"{interpreter!r}: give the python's absolute path on the"
                        " nodes (python.interpreter) or ship a python archive"
                    ),
                )
            )
    if src_dir:
        job["src_dir"] = src_dir if src_dir.startswith("hdfs://") else str(Path(src_dir).resolve())

    default_command = take("tony.containers.command")
    if executes:  # TonY's client joins them into tony.containers.command the same way
        default_command = " ".join(p for p in (executes, task_params) if p)
    default_files = _files("tony.containers.resources", take("tony.containers.resources") or "", unmapped)

    roles: dict[str, Any] = {}
    jobtypes = sorted({m.group(1) for key in conf if (m := _INSTANCES.match(key))})
    for jobtype in jobtypes:
        instances = _int(f"tony.{jobtype}.instances", take(f"tony.{jobtype}.instances") or "0")
        role: dict[str, Any] = {"instances": instances, **_TONY_TASK_DEFAULTS}
        for attr in ("memory", "vcores", "gpus", "node-label", "command", "resources", *_ROLE_UNMAPPED):
            key = f"tony.{jobtype}.{attr}"
            value = take(key)
            if value is None:
                continue
            if attr == "memory":
                role["memory"] = _memory(value)
            elif attr in ("vcores", "gpus"):
                role[attr] = _int(key, value)
            elif attr == "node-label":
                role["node_label"] = value or None
            elif attr == "command":
                role.update(_program(value, python))
            elif attr == "resources":
                job.setdefault("files", {}).update(_files(key, value, unmapped))
            else:
                unmapped.append((key, _ROLE_UNMAPPED[attr]))
        if instances < 1:
            continue  # TonY skips a job type with no instances
        if not {"command", "script", "module"} & set(role) and default_command:
            role.update(_program(default_command, python))
        if jobtype == "tensorboard" and not {"command", "script", "module"} & set(role):
            role["module"] = "airflow_provider_tony.runtime.tensorboard"
        roles[jobtype] = role
    job["roles"] = roles
    if default_files:
        job.setdefault("files", {}).update(default_files)
    if env:
        job["env"] = env

    untracked = take("tony.application.untracked.jobtypes")
    sidecars = take("tony.application.sidecar.jobtypes")
    if untracked is not None or sidecars is not None:
        names = _list(untracked if untracked is not None else "ps") + _list(sidecars or "tensorboard")
        job["untracked_roles"] = list(dict.fromkeys(names))
    if (v := take("tony.application.stop-on-failure-jobtypes")) is not None:
        soft = [r for r in _list(v) if r not in ("chief", "worker", "ps") and r in (job.get("untracked_roles") or [])]
        if soft:
            unmapped.append(
                (
                    "tony.application.stop-on-failure-jobtypes",
                    (
                        f"{soft!r}: an untracked role outside the TensorFlow cluster does not stop the job"
                        " here when it fails (chief, worker, ps and every tracked role do)"
                    ),
                )
            )

    for key in sorted(set(conf) - used):
        unmapped.append(
            (
                key,
                next(
                    (why for prefix, why in _NO_COUNTERPART if key.startswith(prefix)),
                    "not a TonY key this converter knows",
                ),
            )
        )
    return job, unmapped


def job_from_tony_xml(path: str | os.PathLike[str], **options: str | None) -> JobSpec:
    """A validated ``JobSpec`` from a TonY configuration, for ``TonyOperator(job=...)``.

    Keys without a counterpart are ignored here: run ``convert`` once to see them.
    """
    job, _unmapped = convert_tony_xml(path, **options)
    return JobSpec.from_dict(job)


def _comment(text: str) -> str:
    """``text`` fit for one YAML comment line: every line break or control character
    (a property name from someone else's tony.xml may hold ``\\nfiles:``) is escaped."""
    return shown(text, 1000)


def to_yaml(job: dict[str, Any], unmapped: Unmapped) -> str:
    """The JobSpec YAML, headed by a comment listing what was not converted."""
    head = "# Converted from a TonY configuration.\n"
    if unmapped:
        head += "# Not converted:\n" + "".join(f"#   {_comment(key)}: {_comment(why)}\n" for key, why in unmapped)
    return head + yaml.safe_dump(job, sort_keys=False, default_flow_style=False)
