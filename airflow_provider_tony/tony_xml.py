"""TonY jobs as they are: a ``tony.xml`` (plus TonY's command-line options) as a JobSpec.

Why: a TonY user's job should move over without being rewritten by hand.
:func:`convert_tony_xml` maps every TonY key that has a counterpart here and
returns the others with the reason they were left out, so nothing is dropped
silently. Key names are TonY's own (``TonyConfigurationKeys``); per-role keys
are ``tony.<jobtype>.<attribute>`` with job types found, as TonY finds them,
from the ``tony.<jobtype>.instances`` keys. The keys with one counterpart each
are tables (``JOB_RULES``, ``ROLE_RULES``: key, field, converter, or the
reason it is left out); keys with no counterpart at all are ``_NO_COUNTERPART``.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def _framework(key: str, value: str) -> str:
    """TonY's ``tensorflow`` and ``pytorch`` run here; its other frameworks (horovod, mxnet, standalone) do not."""
    from airflow_provider_tony.runtime.frameworks import FRAMEWORKS

    name = value.strip().lower()
    if name not in FRAMEWORKS:
        raise SpecError(key, f"{value!r} does not run here; only {' and '.join(FRAMEWORKS)} jobs do")
    return name


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


_SKIP = object()  # a converter's answer for "leave the field unset" (a zero timeout: TonY's "none")


@dataclass(frozen=True)
class Rule:
    """One TonY key: the JobSpec field it sets and how, or why it has no counterpart here.

    ``key`` is the whole key for a job-level rule, the attribute after ``tony.<jobtype>.``
    for a role rule. With ``field`` set, ``convert(key, value)`` gives the field's value
    (``_SKIP``: leave it unset). Without, the key is listed as not converted with ``reason``
    (``{value!r}`` is filled in) whenever ``unmapped_if(value)`` holds; other values are
    TonY's own behaviour here and need nothing.
    """

    key: str
    field: str | None
    convert: Callable[[str, str], Any] = lambda _key, value: value
    reason: str = ""
    unmapped_if: Callable[[str], bool] = lambda _value: True


def _positive_seconds(per_second: int) -> Callable[[str, str], Any]:
    """A TonY timeout (``per_second``: its units in a second, 1000 for ms) where 0 or less means none."""

    def convert(key: str, value: str) -> Any:
        number = _int(key, value)
        if number <= 0:
            return _SKIP
        return number / per_second if per_second != 1 else number

    return convert


# Job-level keys with one counterpart each, in the order the fields appear in the converted YAML.
JOB_RULES: tuple[Rule, ...] = (
    Rule("tony.application.name", "name"),
    Rule("tony.yarn.queue", "queue"),
    Rule("tony.application.tags", "tags", lambda _k, v: _list(v)),
    Rule("tony.application.timeout", "deadline", _positive_seconds(1000)),
    Rule("tony.am.startup-timeout", "startup_timeout", _positive_seconds(1000)),
    Rule("tony.task.executor.registry-timeout-sec", "registration_timeout", _positive_seconds(1)),
)
# After the heartbeat pair (two keys, two fields: see _heartbeat).
JOB_RULES_AFTER_HEARTBEAT: tuple[Rule, ...] = (
    Rule("tony.am.memory", "am_memory", lambda _k, v: _memory(v)),
    Rule("tony.am.vcores", "am_vcores", _int),
    Rule(
        "tony.am.gpus",
        None,
        reason="the application master does no training and gets no GPUs here",
        unmapped_if=lambda v: v not in ("", "0"),
    ),
    Rule(
        "tony.application.node-label",
        None,
        reason=(
            "the application master's node label is not set here; per-role node labels (tony.<jobtype>.node-label) are"
        ),
        unmapped_if=bool,
    ),
    Rule("tony.application.framework", "framework", lambda k, v: _framework(k, v)),
    Rule(
        "tony.application.distributed-mode",
        None,
        reason="{value!r}: tasks always start together (GANG) here",
        unmapped_if=lambda v: v.upper() != "GANG",
    ),
    Rule(
        "tony.application.fail-on-worker-failure-enabled",
        None,
        reason="any tracked task's failure fails the job here (as TonY with this set to true)",
        unmapped_if=lambda v: v.lower() != "true",
    ),
    # Comma-separated hdfs:// URIs, as TonY reads them: a delegation token is fetched for each.
    Rule("tony.other.namenodes", "other_namenodes", lambda _k, v: _list(v)),
)
# Per-role attributes (``tony.<jobtype>.<attribute>``); ``command`` and ``resources`` are
# handled by _role (a program's several fields, files shared by the whole job).
ROLE_RULES: tuple[Rule, ...] = (
    Rule("memory", "memory", lambda _k, v: _memory(v)),
    Rule("vcores", "vcores", _int),
    Rule("gpus", "gpus", _int),
    Rule("node-label", "node_label", lambda _k, v: v or None),
    *(Rule(attr, None, reason=why) for attr, why in _ROLE_UNMAPPED.items()),
)


class _Conf:
    """The file's keys, remembering which were read, so the rest can be listed as not converted."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = conf
        self.used: set[str] = set()

    def take(self, key: str) -> str | None:
        if key in self.conf:
            self.used.add(key)
            return self.conf[key]
        return None


def _apply(rules: Sequence[Rule], conf: _Conf, prefix: str, target: dict[str, Any], unmapped: Unmapped) -> None:
    """Every rule whose key the file sets: its field into ``target``, or its reason into ``unmapped``."""
    for rule in rules:
        key = prefix + rule.key
        value = conf.take(key)
        if value is None:
            continue
        if rule.field is None:
            if rule.unmapped_if(value):
                unmapped.append((key, rule.reason.format(value=value)))
            continue
        converted = rule.convert(key, value)
        if converted is not _SKIP:
            target[rule.field] = converted


def _heartbeat(conf: _Conf, job: dict[str, Any]) -> None:
    """TonY's interval and missed-beat count, as this provider's interval and timeout (seconds)."""
    interval = conf.take("tony.task.heartbeat-interval-ms")
    misses = conf.take("tony.task.max-missed-heartbeats")
    if interval is not None or misses is not None:
        beat = _int("tony.task.heartbeat-interval-ms", interval or "1000") / 1000
        job["heartbeat_interval"] = beat
        job["heartbeat_timeout"] = beat * _int("tony.task.max-missed-heartbeats", misses or "25")


def _python(
    job: dict[str, Any], python: str | None, python_venv: str | None, python_binary_path: str | None, unmapped: Unmapped
) -> None:
    """TonY's ``--python_venv`` zip (unpacked as venv/, its ``--python_binary_path`` relative to that),
    or an interpreter already on the nodes."""
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
        return
    interpreter = python_binary_path or python
    if not interpreter:
        return
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


def _role(
    conf: _Conf, jobtype: str, job: dict[str, Any], default_command: str | None, python: str | None, unmapped: Unmapped
) -> dict[str, Any] | None:
    """One TonY job type as a role, or None when it has no instances (TonY skips it too)."""
    prefix = f"tony.{jobtype}."
    instances = _int(f"{prefix}instances", conf.take(f"{prefix}instances") or "0")
    role: dict[str, Any] = {"instances": instances, **_TONY_TASK_DEFAULTS}
    _apply(ROLE_RULES, conf, prefix, role, unmapped)
    if (command := conf.take(f"{prefix}command")) is not None:
        role.update(_program(command, python))
    if (resources := conf.take(f"{prefix}resources")) is not None:
        job.setdefault("files", {}).update(_files(f"{prefix}resources", resources, unmapped))
    if instances < 1:
        return None
    if not {"command", "script", "module"} & set(role) and default_command:
        role.update(_program(default_command, python))
    if jobtype == "tensorboard" and not {"command", "script", "module"} & set(role):
        role["module"] = "airflow_provider_tony.runtime.tensorboard"
    return role


def _untracked(conf: _Conf, job: dict[str, Any], unmapped: Unmapped) -> None:
    """TonY's untracked and sidecar job types (``ps`` and ``tensorboard`` by default) are one list here."""
    untracked = conf.take("tony.application.untracked.jobtypes")
    sidecars = conf.take("tony.application.sidecar.jobtypes")
    if untracked is not None or sidecars is not None:
        names = _list(untracked if untracked is not None else "ps") + _list(sidecars or "tensorboard")
        job["untracked_roles"] = list(dict.fromkeys(names))
    if (v := conf.take("tony.application.stop-on-failure-jobtypes")) is not None:
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


def _unknown(conf: _Conf) -> Unmapped:
    """Every key no rule read: TonY keys with no counterpart (by prefix, with why), then the rest."""
    return [
        (
            key,
            next(
                (why for prefix, why in _NO_COUNTERPART if key.startswith(prefix)),
                "not a TonY key this converter knows",
            ),
        )
        for key in sorted(set(conf.conf) - conf.used)
    ]


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
    the command line rather than in the file. The single keys follow the tables
    above (``JOB_RULES``, ``ROLE_RULES``); the helpers here combine the keys that
    only mean something together.
    """
    conf = _Conf(read_tony_xml(path))
    unmapped: Unmapped = []
    job: dict[str, Any] = {}
    _apply(JOB_RULES, conf, "", job, unmapped)
    _heartbeat(conf, job)
    _apply(JOB_RULES_AFTER_HEARTBEAT, conf, "", job, unmapped)

    env: dict[str, str] = {}
    for key in ("tony.containers.envs", "tony.execution.envs"):
        if (v := conf.take(key)) is not None:
            env.update(_env_pairs(key, _list(v), unmapped))
    python = conf.take("tony.python-exec-path")
    _python(job, python, python_venv, python_binary_path, unmapped)
    if src_dir:
        job["src_dir"] = src_dir if src_dir.startswith("hdfs://") else str(Path(src_dir).resolve())

    default_command = conf.take("tony.containers.command")
    if executes:  # TonY's client joins them into tony.containers.command the same way
        default_command = " ".join(p for p in (executes, task_params) if p)
    default_files = _files("tony.containers.resources", conf.take("tony.containers.resources") or "", unmapped)

    roles: dict[str, Any] = {}
    for jobtype in sorted({m.group(1) for key in conf.conf if (m := _INSTANCES.match(key))}):
        role = _role(conf, jobtype, job, default_command, python, unmapped)
        if role is not None:
            roles[jobtype] = role
    job["roles"] = roles
    if default_files:
        job.setdefault("files", {}).update(default_files)
    if env:
        job["env"] = env
    _untracked(conf, job, unmapped)
    return job, unmapped + _unknown(conf)


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
