"""A job's data on HDFS: what it reads, where it checkpoints, what it publishes, and what is pruned after.

Why a module of its own: these sections name HDFS locations and say what the runtime and the
submitting side do there. ``InputSpec``: staged into the tasks before the script starts;
``CheckpointSpec``: uploaded while training, resumed from by a retry, the model published at the
end; ``QualityGate``: the model published only when it is no worse than the last one;
``RetentionSpec``: earlier runs' folders pruned. Their paths take ``model.py``'s location checks
(absolute or ``hdfs://``, no ``.`` or ``..`` component, never a filesystem's root).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from airflow_provider_tony.runtime.model import (
    _FLOAT_TEXT,
    Model,
    _check,
    _hdfs_path,
    _int,
    _location,
    _relative_path,
    _seconds,
    _str_list,
    _text,
    shown,
)


@dataclass
class CheckpointSpec(Model):
    """Where checkpoints live, so that a restarted attempt resumes instead of starting over.

    User code writes into ``local_dir`` inside the container; the runtime
    looks for a new complete checkpoint every ``poll_interval`` seconds and
    uploads the newest to ``dir`` on HDFS, keeping the newest ``keep``, and
    fails the job if uploads keep failing for ``upload_failure_window`` seconds
    (training on without saving is wasted).

    ``poll_interval`` is 30 s because each upload costs the nodes that train
    DataNode and NameNode work (three WebHDFS creates plus a listing, a rename
    and pruning, whatever the checkpoint's size): a script that checkpoints
    every few seconds gets one upload per interval (the newest), and a retry
    resumes from a checkpoint at most that much older than the newest one
    saved. The last checkpoint is always uploaded when the script ends.
    """

    dir: str | None = None
    """Where checkpoints live on HDFS (absolute path or ``hdfs://`` URL); the operator's default is one folder per task
    run, so a retry resumes."""
    warm_start_from: str | None = None
    """Another run's checkpoint folder to start from when ``dir`` has no checkpoint yet."""
    keep: int = 3
    """How many of the newest checkpoints to keep on HDFS."""
    keep_best: int = 0
    """How many of the best checkpoints to keep on HDFS besides the newest ``keep``, judged by ``quality_gate.metric``
    (its ``mode``) as the script last reported it before the checkpoint was uploaded; 0 keeps only the newest."""
    upload_failure_window: float = 600.0
    """Seconds a new checkpoint may stay un-uploaded (HDFS trouble) before the job fails as retryable."""
    poll_interval: float = 30.0
    """Seconds between looks for a new complete checkpoint to upload (the newest one each time)."""
    model_dir: str | None = None
    """HDFS folder the deciding task's ``$TONY_MODEL_DIR`` is published to when the job succeeds."""
    local_dir: str = "checkpoints"
    """The folder user code writes checkpoints to (``$TONY_CHECKPOINT_DIR``), relative to the container's working
    directory."""

    def validate(self) -> None:
        self.dir = _hdfs_path(self.dir, "dir")
        self.warm_start_from = _hdfs_path(self.warm_start_from, "warm_start_from")
        self.model_dir = _hdfs_path(self.model_dir, "model_dir")
        self.keep = _int(self.keep, "keep", 1, "keep at least the newest checkpoint")
        self.keep_best = _int(self.keep_best, "keep_best", 0, "give 0 (only the newest) or how many best to keep")
        self.upload_failure_window = _seconds(self.upload_failure_window, "upload_failure_window")
        self.poll_interval = _seconds(self.poll_interval, "poll_interval")
        self.local_dir = _relative_path(self.local_dir, "local_dir", "checkpoints")


GATE_MODES = ("max", "min")
_PERCENT = re.compile(r"^(\d+\.?\d*|\.\d+)%$")


@dataclass
class QualityGate(Model):
    """Publish the model only when it is at least as good as the last published one.

    The deciding task's last ``progress.report`` carries the job's evaluation
    metric (``metric``); the model goes to a candidate folder beside
    ``checkpoint.model_dir`` and the submitting side (the operator, ``tony
    submit``) compares its figure with the last published model's, read from
    the pointer on HDFS. Passing publishes the model as
    ``<model_dir>.versions/<application id>`` and switches the pointer (and
    emits the model asset's event); failing leaves it as
    ``<model_dir>.rejected-<application id>`` and fails the task without
    retries (a retry trains the same model again). A job with no published
    model yet passes.
    """

    metric: str | None = None
    """The evaluation metric to judge the model by, as the script reports it (``progress.report(val_accuracy=...)``
    or a Keras log name); null turns the gate off."""
    mode: str = "max"
    """``max``: higher is better (accuracy); ``min``: lower is better (loss). A tie passes."""
    record: str | None = None
    """The pointer: the HDFS file naming the published model (its record: application id, figures, version folder),
    replaced atomically on each pass; null uses ``<checkpoint.model_dir>.versions/current.json``. Set it to share one
    pointer between jobs or when ``model_dir`` changes per run (``/models/digits/{{ ds }}``)."""
    tolerance: float | str | None = None
    """How much worse than the published model a model may be and still pass: a number in the metric's units
    (``0.005``: at most 0.005 below for ``max``, above for ``min``) or a percentage of the published figure (``"1%"``).
    A night scored on another day's held-out data varies a little; null (the default): at least as good."""
    approval: bool = False
    """Ask a person before publishing a model that passes only thanks to ``tolerance`` (worse than the published one):
    the gate keeps it a candidate, its verdict says ``awaiting_approval``, the task succeeds without publishing, and a
    later task publishes it once approved (``TonyPublishBestOperator(approved=True)`` after Airflow's
    ``ApprovalOperator``, as the example nightly DAG does). A model at least as good is published at once."""

    def validate(self) -> None:
        _check(
            isinstance(self.approval, bool),
            "approval",
            lambda: f"{shown(self.approval)} is not true or false; give true to ask before publishing within tolerance",
        )
        if self.metric is not None:
            self.metric = _text(self.metric, "metric", "give the metric's name as the script reports it")
        self.mode = _text(self.mode, "mode", "use 'max' or 'min'")
        _check(
            self.mode in GATE_MODES,
            "mode",
            lambda: f"{shown(self.mode)} is not a mode; use 'max' (higher is better) or 'min'",
        )
        self.record = _hdfs_path(self.record, "record")
        if isinstance(self.tolerance, str):  # a rendered template is text: "0.005" is the number
            text = self.tolerance.strip()
            self.tolerance = float(text) if _FLOAT_TEXT.match(text) else text
        if self.tolerance is not None:
            self.allowance(1.0)  # the field's own check, with the message naming it

    def allowance(self, previous: float) -> float:
        """How far past ``previous`` (in the worse direction) a figure may be and still pass."""
        fix = "give a number >= 0 in the metric's units (0.005) or a percentage of the published figure ('1%')"
        tol = self.tolerance
        if tol is None:
            return 0.0
        if isinstance(tol, str):
            text = tol.strip()
            _check(_PERCENT.match(text) is not None, "tolerance", lambda: f"{shown(tol)} is not a tolerance; {fix}")
            return abs(previous) * float(text[:-1]) / 100.0
        _check(
            isinstance(tol, (int, float)) and not isinstance(tol, bool) and math.isfinite(tol) and tol >= 0,
            "tolerance",
            lambda: f"{shown(tol)} is not a tolerance; {fix}",
        )
        return float(tol)

    @property
    def enabled(self) -> bool:
        return self.metric is not None


@dataclass
class RetentionSpec(Model):
    """What the operator prunes of its own task's earlier runs after a run succeeded (``tony gc`` does all tasks).

    Only the operator's default checkpoint folders
    (``<base_path>/checkpoints/<dag>/<task>/<run>``) are pruned: an older
    run's folder and the ``.damaged-`` copies in it. The newest run and any
    folder holding a published model always stay.
    """

    max_age_days: float | None = None
    """Remove this task's run folders (and ``.damaged-`` checkpoint copies) unused for this many days; null: no age
    limit."""
    keep_runs: int | None = None
    """Keep only this task's newest N run folders; null: no count limit."""

    def validate(self) -> None:
        if self.max_age_days is not None:
            days = self.max_age_days
            ok = not isinstance(days, bool) and isinstance(days, (int, float)) and math.isfinite(days) and days > 0
            _check(
                ok, "max_age_days", lambda: f"{shown(days)} is not a number of days; give a positive number, or null"
            )
            self.max_age_days = float(days)
        if self.keep_runs is not None:
            self.keep_runs = _int(self.keep_runs, "keep_runs", 1, "keep at least the newest run (1), or null")


#: ``all``: every file of the input to every task that receives it; ``shard``: the files dealt
#: across those tasks, each file to exactly one task.
SHARDING_POLICIES: tuple[str, ...] = ("all", "shard")
_INPUT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass
class InputSpec(Model):
    """One named input on HDFS (``inputs.<name>`` of a job): a folder, file or glob, staged into the containers.

    Checked on the submitting side before anything is submitted (the path exists and holds files of known
    sizes), then copied to each receiving task's local disk over WebHDFS, with the job's delegation token on
    a Kerberized cluster, before the script starts. The script finds its files in ``$TONY_INPUT_<NAME>_DIR``
    and the list (with sizes) in ``$TONY_INPUT_<NAME>_MANIFEST``.
    """

    path: str = ""
    """Required. An absolute HDFS path or ``hdfs://`` URL: a folder (its files; names starting with ``_`` or ``.``,
    such as ``_SUCCESS``, are skipped as Hadoop skips them), a file, or a glob (``*``, ``?``, ``[...]`` in any
    component, like ``/data/clicks/dt=2026-12-01/part-*``). Templated in the operator: ``/data/clicks/dt={{ ds }}``."""
    sharding: str = "all"
    """``all``: every task that receives the input gets every file; ``shard``: the files are dealt across those
    tasks (by size, deterministically), so the shards are disjoint and together cover every file."""
    roles: list[str] = field(default_factory=list)
    """The roles whose tasks receive the input; empty means the job's tracked roles (those that decide success)."""
    retryable_if_missing: bool = True
    """A missing or empty input fails the Airflow try before submit as retryable (a late partition is normal:
    the next try looks again); false fails it without retries."""
    max_bytes_per_task: int | None = None
    """The most bytes of this input one task may stage (its shard, or every file under ``all``); checked before
    submit and again in each task, where the task's free disk is checked too. Over it, the job fails without
    retries (a retry would fill the disk again). Unset: only the free disk limits."""

    def validate(self) -> None:
        _check(
            self.max_bytes_per_task is None
            or (
                isinstance(self.max_bytes_per_task, int)
                and not isinstance(self.max_bytes_per_task, bool)
                and self.max_bytes_per_task > 0
            ),
            "max_bytes_per_task",
            lambda: (
                f"{str(self.max_bytes_per_task)[:40]!r} is not a positive number of bytes; give one like 50000000000"
            ),
        )
        fix = "give an absolute HDFS path, hdfs:// URL or glob, like '/data/clicks/dt=2026-12-01'"
        self.path = _location(self.path, "path", fix)
        self.sharding = _text(self.sharding, "sharding", "use 'all' or 'shard'")
        _check(
            self.sharding in SHARDING_POLICIES,
            "sharding",
            lambda: (
                f"{shown(self.sharding)} is not a sharding policy; use one of {', '.join(map(repr, SHARDING_POLICIES))}"
            ),
        )
        self.roles = _str_list(self.roles, "roles", "['worker']")
        _check(
            isinstance(self.retryable_if_missing, bool),
            "retryable_if_missing",
            lambda: f"{shown(self.retryable_if_missing)} is not true or false; give true or false",
        )


#: The early-stopping rules a job may opt into (``early_stopping.rule``).
STOPPING_RULES: tuple[str, ...] = ("median",)


@dataclass
class EarlyStopping(Model):
    """Opt-in: a trial of a hyperparameter sweep stops itself when it falls behind the finished trials.

    Each trial that finishes (and was not stopped) writes its curve of ``metric``
    (step -> value, from the deciding task's reports) as ``<sweep>/<application id>.json``.
    While a trial runs, its application master reads that folder and, at each new
    step from ``grace_steps`` on, compares the trial's value with the median of
    the finished trials' values at that step (each one's newest point at or before
    it). Strictly worse stops the job: it succeeds, with the stop in its state
    document and XCom (``early_stopped``) and no model to publish (the quality gate
    is skipped). See ``runtime/median_stop.py``.
    """

    rule: str | None = None
    """``median``: the median-stopping rule; null (the default) turns early stopping off."""
    metric: str | None = None
    """Required with ``rule``: the metric the script reports at each step (``progress.report(step, loss=...)``)."""
    mode: str = "min"
    """``min``: lower is better (a loss); ``max``: higher is better (an accuracy). A tie with the median is not
    worse."""
    sweep: str | None = None
    """Required with ``rule``: the HDFS folder the sweep's trials share (absolute path or ``hdfs://`` URL); templated
    in the operator like the other paths (``/user/me/sweeps/{{ run_id }}``)."""
    min_finished: int = 1
    """How many finished trials must have a value at a step before the rule may stop anything there."""
    grace_steps: int = 0
    """No stop before this step (early steps are noisy)."""

    def validate(self) -> None:
        self.min_finished = _int(self.min_finished, "min_finished", 1, "give 1 or more finished trials")
        self.grace_steps = _int(self.grace_steps, "grace_steps", 0, "give 0 or the first step a stop may happen at")
        self.mode = _text(self.mode, "mode", "use 'min' or 'max'")
        _check(
            self.mode in GATE_MODES,
            "mode",
            lambda: f"{shown(self.mode)} is not a mode; use 'min' (lower is better, a loss) or 'max'",
        )
        if self.rule is None:
            _check(
                self.metric is None and self.sweep is None,
                "rule",
                "is missing while metric or sweep is set; give rule: median, or remove early_stopping",
            )
            return
        self.rule = _text(self.rule, "rule", "use 'median'")
        _check(
            self.rule in STOPPING_RULES,
            "rule",
            lambda: f"{shown(self.rule)} is not a rule; use one of {', '.join(map(repr, STOPPING_RULES))}",
        )
        _check(self.metric is not None, "metric", "is missing; give the metric the script reports, like 'loss'")
        self.metric = _text(self.metric, "metric", "give the metric's name as the script reports it, like 'loss'")
        _check(
            self.sweep is not None,
            "sweep",
            "is missing; give the HDFS folder the sweep's trials share, like '/user/me/sweeps/{{ run_id }}'",
        )
        self.sweep = _hdfs_path(self.sweep, "sweep")

    @property
    def enabled(self) -> bool:
        return self.rule is not None
