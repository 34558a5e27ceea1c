"""The conclusion of a finished job: its final cost, the quality gate, the history's verdict, retention.

Whichever way a job was followed to its end (the operator polling or deferred, a
re-attach, the re-use of an application that had already succeeded, ``tony submit``),
what follows is the same, and it is here once: the ResourceManager is asked again for
the final cost where the ending report undercounts; a succeeded job with a quality gate
has its model judged, published or set aside (``runtime/gate.py``) and the verdict added
to its stored history; a job whose model stands has its task's older runs pruned
(``retention``, the operator's only: it names the task's folder). A trial the sweep's
median rule stopped (``early_stopping``) succeeded with no model: neither the gate nor
retention runs for it.

:func:`conclude` logs nothing and raises nothing: it returns a :class:`Conclusion`
that each caller says in its own words (the task log, ``tony submit``'s lines) and
turns into its own outcome (an undecided gate is retried, a failed one is not). Only
the gate's decision changes the outcome: the cost, the history's note and retention
are best effort, their errors kept in the conclusion to be shown as warnings.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_tony.runtime import gate
from airflow_provider_tony.runtime.history import history_paths
from airflow_provider_tony.runtime.messages import Cost, EarlyStop, GateResult
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.follower import AppReport, JobResult


class Cluster(Protocol):
    """What concluding asks of the cluster: ``YarnHook`` (the operator's) and ``TonyClient`` (the CLI's)."""

    @property
    def history_dir(self) -> str: ...

    def final_cost(self, app_id: str) -> Cost | None: ...

    def webhdfs_for(self, spec: JobSpec) -> Any: ...


class Housekeeper(Protocol):
    """What retention asks besides: the provider's WebHDFS client, its base path, the applications running."""

    @property
    def base_path(self) -> str: ...

    def webhdfs(self) -> Any: ...

    def find_by_tags(self, tags: list[str]) -> Sequence[AppReport]: ...


@dataclass(frozen=True)
class Conclusion:
    """What came of a finished job, once it was concluded.

    ``result`` carries the final cost. ``gate`` is the quality gate's verdict (None: no
    gate, or it was not decided); ``undecided`` the error that kept it from being decided
    (HDFS trouble: the model stays a candidate, asking again may decide it). ``published``:
    the job succeeded, writes a model (``checkpoint.model_dir``), and it stands (no gate, or the gate passed).
    ``held``: the job's model passed no gate because the caller asked for none (``publish=False``: a sweep's
    trial, whose best one a later task publishes); it stays a candidate (``gate.candidate_dir``).
    ``pruned``: the folders retention removed, with why (all it set out to remove, unless
    ``retention_error`` says where it stopped). The ``*_error`` fields are the best-effort
    steps that failed; none of them changes the outcome. ``early_stopped``: the sweep's
    median rule stopped the job (it succeeded with no model; the gate was skipped).
    """

    result: JobResult
    gate: GateResult | None = None
    undecided: Exception | None = None
    published: bool = False
    pruned: tuple[tuple[str, str], ...] = ()
    cost_error: Exception | None = None
    history_error: Exception | None = None
    retention_error: Exception | None = None
    held: bool = False
    early_stopped: EarlyStop | None = None


@dataclass(frozen=True)
class TaskRuns:
    """Retention's scope: the folder of one task's runs (``<base_path>/checkpoints/<dag>/<task>``)."""

    cluster: Housekeeper
    folder: str


def conclude(
    cluster: Cluster, spec: JobSpec | None, result: JobResult, *, runs: TaskRuns | None = None, publish: bool = True
) -> Conclusion:
    """Conclude the finished job ``result`` of ``spec`` (None: the job could not be rebuilt, only the cost).

    ``publish=False`` leaves a gated model where the executor put it, a candidate: nothing is
    judged or moved, and retention waits for whichever task publishes (``operators/publish_best.py``).

    Call it once per job end: the gate publishes at most once whatever happens (asking
    again after a crash is safe, ``gate.apply`` moves nothing twice), but retention and
    what a caller announces from the conclusion are not for saying twice.
    """
    result, cost_error = _with_final_cost(cluster, result)
    if not result.succeeded:
        return Conclusion(result, cost_error=cost_error)
    stopped = result.am_state.early_stopped if result.am_state is not None else None
    if stopped is not None:  # stopped on purpose, with no model: no candidate to judge, nothing to publish
        return Conclusion(result, cost_error=cost_error, early_stopped=stopped)
    verdict: GateResult | None = None
    history_error: Exception | None = None
    if spec is not None and spec.quality_gate.enabled and not publish:
        return Conclusion(result, cost_error=cost_error, held=True)
    if spec is not None and spec.quality_gate.enabled:
        try:
            verdict, history_error = judged(cluster, spec, result.app_id, checkpoint_dir=spec.checkpoint.dir)
        except Exception as exc:  # noqa: BLE001 - HDFS trouble: not decided, the model stays a candidate
            return Conclusion(result, undecided=exc, cost_error=cost_error)
        if not verdict.passed:
            return Conclusion(result, gate=verdict, cost_error=cost_error, history_error=history_error)
    pruned: tuple[tuple[str, str], ...] = ()
    retention_error: Exception | None = None
    if spec is not None and runs is not None and (spec.retention.max_age_days or spec.retention.keep_runs):
        pruned, retention_error = _prune(spec, runs)
    published = bool(verdict.model_dir if verdict is not None else spec is not None and spec.checkpoint.model_dir)
    return Conclusion(result, verdict, None, published, pruned, cost_error, history_error, retention_error)


def judged(
    cluster: Cluster, spec: JobSpec, app_id: str, *, checkpoint_dir: str | None, approved: bool = False
) -> tuple[GateResult, Exception | None]:
    """The gate's verdict on application ``app_id``'s model (``gate.apply``: published, held or set aside)
    and the error, if any, that kept the verdict from its stored history (the history beside
    ``checkpoint_dir`` and in the cluster's history folder: the page misses it, the verdict stands).

    HDFS trouble while deciding raises: the model stays a candidate and asking again may decide it.
    The operator's conclusion and ``TonyPublishBestOperator`` (a sweep's best, an approved model) judge here.
    """
    hdfs = cluster.webhdfs_for(spec)  # the model's folders on model_dir's NameNode
    verdict = gate.apply(hdfs, spec, app_id, approved=approved)
    try:
        gate.annotate_history(hdfs, history_paths(app_id, checkpoint_dir, cluster.history_dir), verdict)
    except Exception as exc:  # noqa: BLE001 - the page misses the verdict; the outcome stands
        return verdict, exc
    return verdict, None


def _with_final_cost(cluster: Cluster, result: JobResult) -> tuple[JobResult, Exception | None]:
    """``result`` with the final cost: the ending report undercounts until YARN's count is final."""
    if result.cost is not None and result.cost.final:
        return result, None
    try:
        cost = cluster.final_cost(result.app_id) or result.cost
    except Exception as exc:  # noqa: BLE001 - the cost is a report: it must not change the outcome
        return result, exc
    return dataclasses.replace(result, cost=cost), None


def _prune(spec: JobSpec, runs: TaskRuns) -> tuple[tuple[tuple[str, str], ...], Exception | None]:
    """The job's ``retention`` over its task's older runs: what it removes, and the error that stopped it."""
    from airflow_provider_tony import retention

    removals: list[tuple[Any, str]] = []
    try:
        policy = retention.Policy(spec.retention.max_age_days, spec.retention.keep_runs)
        hdfs = runs.cluster.webhdfs()
        protect = [d for d in (spec.checkpoint.dir, spec.checkpoint.model_dir) if d]
        # Every running application's folders stay, not only this run's: an older run of this task
        # beyond keep_runs may still be training (a manual run, a backfill).
        running = [app.tags for app in runs.cluster.find_by_tags([])]
        active = retention.active_folders(runs.cluster.base_path, running)
        items = retention.scan_task(hdfs, runs.folder, protect, active)
        removals = retention.plan(items, policy, wall_now=time.time())
        retention.remove(hdfs, removals)
    except Exception as exc:  # noqa: BLE001 - housekeeping must not fail a trained job
        return tuple((item.path, why) for item, why in removals), exc
    return tuple((item.path, why) for item, why in removals), None


__all__ = ["Cluster", "Conclusion", "Housekeeper", "TaskRuns", "conclude", "judged"]
