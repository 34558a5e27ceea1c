"""Checks only the submitting side runs: the cluster's limits and the files on this machine.

They need a ResourceManager's answers or the submitting machine's disk, so
they live here beside ``TonyClient`` rather than in ``runtime/spec.py``, which
is shipped into every container and is the job model alone. Each check takes
plain data (``ClusterInfo``, a ``JobSpec``), so it is unit-tested without a
cluster, and raises ``SpecError`` naming the dotted field, the value and the fix,
before anything is submitted.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime.errors import InputMissing, SpecError
from airflow_provider_tony.runtime.inputs import InputFile, check_cap, check_shardable, list_input
from airflow_provider_tony.runtime.spec import JobSpec

__all__ = [
    "DOMINANT_CALCULATOR",
    "RESOURCE_CALCULATOR_KEY",
    "ClusterInfo",
    "check_inputs",
    "cluster_info_from_rm",
    "validate_against_cluster",
    "validate_local_files",
]

_HDFS = "hdfs://"


def _check(cond: bool, field_: str, message: str) -> None:
    if not cond:
        raise SpecError(field_, message)


def _is_hdfs(path: str) -> bool:
    return path.startswith(_HDFS)


@dataclass
class ClusterInfo:
    """What the ResourceManager says about the cluster; filled by ``cluster_info_from_rm`` below.

    Kept as pure data so the checks below are testable without a cluster.
    """

    max_memory_mb: int
    max_vcores: int
    resource_types: list[str]
    queues: list[str]
    total_memory_mb: int
    total_vcores: int
    node_labels: list[str] = field(default_factory=list)
    #: Running nodes' host names and their labels; empty when unknown.
    hosts: dict[str, list[str]] = field(default_factory=dict)
    #: The Capacity Scheduler's ``yarn.scheduler.capacity.resource-calculator`` (a class name), from the
    #: conf dir's capacity-scheduler.xml or the RM; None when neither tells.
    resource_calculator: str | None = None

    @property
    def schedules_vcores(self) -> bool | None:
        """Whether the scheduler places containers by vcores too: True with the DominantResourceCalculator,
        False with any other (the DefaultResourceCalculator counts memory alone), None when unknown."""
        if self.resource_calculator is None:
            return None
        return self.resource_calculator.rsplit(".", 1)[-1] == DOMINANT_CALCULATOR


#: The calculator that counts vcores (and other resources) beside memory; Hadoop's default
#: (``DefaultResourceCalculator``) places containers by memory alone.
DOMINANT_CALCULATOR = "DominantResourceCalculator"
RESOURCE_CALCULATOR_KEY = "yarn.scheduler.capacity.resource-calculator"


def validate_against_cluster(spec: JobSpec, cluster: ClusterInfo) -> list[str]:
    """Reject requests YARN could never satisfy, before submitting; return the warnings.

    Why: YARN does not fail an impossible request, it leaves the application
    ACCEPTED or the containers pending until some timeout; checking here
    turns a silent hang into a message that says what to change. The job's
    vcores against the cluster's total refuse only where the scheduler counts
    them (``DominantResourceCalculator``): under the default calculator YARN
    places containers by memory alone and over-commits vcores, so more vcores
    than the cluster has is a warning, not an impossible job.
    """

    def fits(value: int, maximum: int, field_: str, unit: str, knob: str) -> None:
        _check(
            value <= maximum,
            field_,
            f"{value} {unit} is above the cluster's maximum container size of {maximum} {unit}; lower it,"
            f" or ask the YARN admin to raise {knob}",
        )

    mb, vc = "yarn.scheduler.maximum-allocation-mb", "yarn.scheduler.maximum-allocation-vcores"
    fits(spec.am_memory, cluster.max_memory_mb, "am_memory", "MiB", mb)
    fits(spec.am_vcores, cluster.max_vcores, "am_vcores", "vcores", vc)
    for name in spec.role_names():
        role, where = spec.roles[name], f"roles.{name}"
        fits(role.memory, cluster.max_memory_mb, f"{where}.memory", "MiB", mb)
        fits(role.vcores, cluster.max_vcores, f"{where}.vcores", "vcores", vc)
        _check(
            role.gpus == 0 or "yarn.io/gpu" in cluster.resource_types,
            f"{where}.gpus",
            f"{role.gpus} GPUs requested but the cluster has no GPU resource type (yarn.io/gpu) among"
            f" {cluster.resource_types!r}; set gpus=0 or submit to a GPU cluster",
        )
        _check(
            role.node_label is None or role.node_label in cluster.node_labels,
            f"{where}.node_label",
            f"{role.node_label!r} is not a node label of this cluster (known: {cluster.node_labels!r});"
            " remove node_label or ask the YARN admin to add the label",
        )
        placement = role.placement
        if placement is not None and cluster.hosts:
            for i, host in enumerate(placement.nodes):
                _check(
                    host in cluster.hosts,
                    f"{where}.placement.nodes[{i}]",
                    f"{host!r} is not a running node of this cluster (running: {sorted(cluster.hosts)!r}); "
                    "fix the host name or remove it from the list",
                )
                labels = cluster.hosts[host]
                _check(
                    role.node_label is None or role.node_label in labels,
                    f"{where}.placement.nodes[{i}]",
                    f"{host!r} does not carry the role's node_label {role.node_label!r} (it has {labels!r}); "
                    "list nodes with that label, or change node_label",
                )
    # A queue given as a full path ("root.a.b") is matched by its leaf name; an
    # empty list means the queues could not be read, which must not block submits.
    _check(
        not cluster.queues or spec.queue in cluster.queues or spec.queue.rsplit(".", 1)[-1] in cluster.queues,
        "queue",
        f"{spec.queue!r} is not a queue of this cluster; use one of {', '.join(map(repr, cluster.queues))}",
    )
    return _check_totals(spec, cluster)


def _check_totals(spec: JobSpec, cluster: ClusterInfo) -> list[str]:
    """The whole job against the whole cluster: memory always refuses, vcores only where they are scheduled."""
    warnings: list[str] = []
    # TensorFlow needs every task up at once, so a job larger than the whole
    # cluster would wait for registration_timeout and then fail.
    need_mb = spec.am_memory + sum(r.instances * r.memory for r in spec.roles.values())
    need_vc = spec.am_vcores + sum(r.instances * r.vcores for r in spec.roles.values())
    _check(
        not cluster.total_memory_mb or need_mb <= cluster.total_memory_mb,
        "roles",
        f"the job needs {need_mb} MiB in total (all tasks + AM) but the cluster has"
        f" {cluster.total_memory_mb} MiB; lower instances or memory",
    )
    if cluster.total_vcores and need_vc > cluster.total_vcores:
        message = f"the job needs {need_vc} vcores in total (all tasks + AM) but the cluster has {cluster.total_vcores}"
        schedules = cluster.schedules_vcores
        _check(
            schedules is not True,
            "roles",
            f"{message}, and its scheduler counts vcores ({DOMINANT_CALCULATOR}); lower instances or vcores",
        )
        why = (
            "its scheduler places containers by memory alone"
            if schedules is False
            else f"its scheduler's {RESOURCE_CALCULATOR_KEY} is unknown here (no capacity-scheduler.xml in the conf"
            " dir); if it is the DominantResourceCalculator the job will wait for registration_timeout"
        )
        warnings.append(f"roles: {message}; submitted anyway: {why}, the tasks share the cores")
    return warnings


def check_inputs(spec: JobSpec, client: Any) -> dict[str, list[InputFile]]:
    """Each of the job's inputs exists on HDFS and holds files of known sizes (``client``: WebHDFS).

    Why before submit: a missing partition found by a container costs a YARN
    application and its queue time, and reads as a task failure; found here it
    is one line naming the path. A late partition is normal, so the error is
    retryable or not as the input's ``retryable_if_missing`` says. Returns
    what was listed, which the containers check again (``inputs.seen_env``).
    """
    listed: dict[str, list[InputFile]] = {}
    for name, item in spec.inputs.items():
        try:
            files = list_input(client, item.path, f"inputs.{name}.path")
        except InputMissing as exc:
            then = (
                "this try fails as retryable: the next one looks again"
                if item.retryable_if_missing
                else "this try fails without retries (retryable_if_missing is false)"
            )
            message = f"{str(exc)[len(exc.field) + 2 :]}; nothing was submitted and {then}"
            raise InputMissing(exc.field, exc.path, message, retryable=item.retryable_if_missing) from None
        check_shardable(spec, name, files)
        check_cap(spec, name, files)
        listed[name] = files
    return listed


def validate_local_files(spec: JobSpec) -> None:
    """Check that everything to be shipped from this machine exists here.

    Why: a missing file otherwise surfaces as a localisation failure inside
    YARN, after the job was queued, with a Java stack trace instead of a path.
    HDFS sources are not checked (that needs a cluster connection).
    """
    for dest, src in spec.files.items():
        _check(
            _is_hdfs(src) or os.path.exists(src),
            f"files.{dest}",
            f"{src!r} file not found on this machine; fix the source path, or upload it to HDFS and use an hdfs:// URL",
        )
    archive = spec.python.archive
    _check(
        archive is None or _is_hdfs(archive) or os.path.isfile(archive),
        "python.archive",
        f"{archive!r} file not found on this machine; build it with venv-pack/conda-pack or fix the path",
    )
    for name in spec.role_names():
        script = spec.roles[name].script
        if script is None:
            continue
        where = f"roles.{name}.script"
        if spec.src_dir is not None and not script.startswith("/"):
            continue  # relative to the source tree: yarn/source.py checks it
        if script.startswith("/"):
            _check(
                os.path.isfile(script),
                where,
                f"{script!r} file not found on this machine; fix the path (an absolute script is shipped from here)",
            )
        else:
            _check(
                _is_shipped(script, spec.files),
                where,
                f"{script!r} file not found among the shipped files {sorted(spec.files)!r}; add it to files,"
                f" e.g. files={{{script!r}: '/local/path/{posixpath.basename(script)}'}}, or ship its directory",
            )


def _is_shipped(script: str, files: Mapping[str, str]) -> bool:
    """Whether a relative script is a ``files`` key or lies under a shipped directory."""
    if script in files:
        return True
    for dest, src in files.items():
        if not script.startswith(dest + "/"):
            continue
        if _is_hdfs(src):
            return True  # cannot look inside HDFS from here; trust it
        if os.path.isfile(os.path.join(src, script[len(dest) + 1 :])):
            return True
    return False


def cluster_info_from_rm(
    scheduler: dict[str, Any],
    metrics: dict[str, Any],
    labels: dict[str, Any] | None,
    nodes: dict[str, Any] | None = None,
    resource_calculator: str | None = None,
) -> ClusterInfo:
    """``ClusterInfo`` from the ResourceManager's REST answers.

    :param scheduler: ``/ws/v1/cluster/scheduler``'s ``scheduler.schedulerInfo``.
    :param metrics: ``/ws/v1/cluster/metrics``'s ``clusterMetrics``.
    :param labels: ``/ws/v1/cluster/get-node-labels`` (its key differs across Hadoop versions).
    :param nodes: ``/ws/v1/cluster/nodes?states=RUNNING`` (for placement), or None when not read.
    :param resource_calculator: the calculator named by the conf dir's capacity-scheduler.xml, if any;
        else the scheduler's answer when it names one (``resourceCalculator``; Hadoop 3.4's Capacity
        Scheduler does not), else unknown.
    """
    leaves: list[str] = []

    def walk(queue: dict[str, Any]) -> None:
        children = (queue.get("queues") or {}).get("queue") or []
        if not children and queue.get("queueName"):
            leaves.append(queue["queueName"])
        for child in children:
            walk(child)

    walk(scheduler)
    max_alloc = scheduler.get("maximumAllocation") or {}
    resources = [r["name"] for r in (max_alloc.get("resourceInformations") or {}).get("resourceInformation", [])]
    found = (labels or {}).get("nodeLabelInfo") or (labels or {}).get("nodeLabel") or []
    if isinstance(found, dict):
        found = [found]
    return ClusterInfo(
        max_memory_mb=int(max_alloc.get("memory", 0)),
        max_vcores=int(max_alloc.get("vCores", 0)),
        resource_types=resources or ["memory-mb", "vcores"],
        queues=leaves,
        total_memory_mb=int(metrics.get("totalMB", 0)),
        total_vcores=int(metrics.get("totalVirtualCores", 0)),
        node_labels=[lbl["name"] if isinstance(lbl, dict) else str(lbl) for lbl in found],
        hosts=_running_hosts(nodes),
        resource_calculator=resource_calculator or _calculator_of(scheduler),
    )


def _calculator_of(scheduler: dict[str, Any]) -> str | None:
    """The resource calculator the scheduler's REST answer names, if it names one."""
    for key in ("resourceCalculator", "resourceCalculatorClass", "resource-calculator"):
        value = scheduler.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _running_hosts(nodes: dict[str, Any] | None) -> dict[str, list[str]]:
    listed = ((nodes or {}).get("nodes") or {}).get("node") or []
    if isinstance(listed, dict):  # Jersey renders a one-element list as the element
        listed = [listed]
    return {
        str(n["nodeHostName"]): [str(lbl) for lbl in n.get("nodeLabels") or []]
        for n in listed
        if isinstance(n, dict) and n.get("nodeHostName") and n.get("state", "RUNNING") == "RUNNING"
    }
