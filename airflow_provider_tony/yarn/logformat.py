"""What a followed job looks like in a task log (and in ``tony submit``'s output).

One place for the words, so the polling operator, the trigger and the CLI
print the same lines: a summary per poll (how many tasks are in each state,
the deciding task's step and metrics), a line for a task only when its state
changes, and failed containers' log tails folded in ``::group::`` sections,
which Airflow's log view collapses. Pure functions of the AM's state document.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from airflow_provider_tony.runtime.messages import Progress, StateDocument

__all__ = ["decider_of", "log_groups", "metrics_text", "progress_text", "summary_line", "task_state_lines"]

GROUP_START = "::group::"
GROUP_END = "::endgroup::"
TAIL_LINES = 60


def decider_of(doc: StateDocument) -> str | None:
    """The task whose progress stands for the job: chief:0, else worker:0, else the first tracked one."""
    for candidate in ("chief:0", "worker:0"):
        if candidate in doc.tasks:
            return candidate
    return next((tid for tid, t in sorted(doc.tasks.items()) if t.tracked), None)


def metrics_text(metrics: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(metrics.items()))


def progress_text(progress: Progress | None) -> str:
    """``step 40 epoch 2 (loss=0.31)``, or "" before the first report."""
    if progress is None or progress.step is None:
        return ""
    text = f"step {progress.step}" + (f" epoch {progress.epoch}" if progress.epoch is not None else "")
    metrics = metrics_text(progress.metrics)
    return text + (f" ({metrics})" if metrics else "")


def summary_line(doc: StateDocument) -> str:
    """``RUNNING: 2 RUNNING, 1 PENDING | worker:0 step 40 epoch 2 (loss=0.31)``."""
    counts = Counter(t.state for t in doc.tasks.values())
    text = f"{doc.app_state}: " + (", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no tasks yet")
    decider = decider_of(doc)
    progress = progress_text(doc.tasks[decider].progress) if decider else ""
    return text + (f" | {decider} {progress}" if progress else "")


def task_state_lines(doc: StateDocument, seen: dict[str, str]) -> list[str]:
    """A line for each task whose state differs from ``seen`` (updated in place)."""
    lines = []
    for task_id, task in sorted(doc.tasks.items()):
        before = seen.get(task_id)
        if before == task.state:
            continue
        seen[task_id] = task.state
        where = f" on {task.host}" + (f":{task.port}" if task.port else "") if task.host else ""
        change = f"{before} -> {task.state}" if before else task.state
        extra = f" (exit code {task.exit_code})" if task.exit_code not in (None, 0) else ""
        lines.append(f"{task_id} {change}{where}{extra}")
    return lines


def log_groups(title: str, text: str, tail: int = TAIL_LINES) -> list[str]:
    """The last ``tail`` lines of ``text`` between ``::group::title`` and ``::endgroup::``."""
    lines = text.splitlines()[-tail:]
    return [f"{GROUP_START}{title} (last {len(lines)} lines)", *lines, GROUP_END]
