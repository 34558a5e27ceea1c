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

__all__ = ["decider_of", "shown", "log_groups", "metrics_text", "progress_text", "summary_line", "task_state_lines"]

GROUP_START = "::group::"
GROUP_END = "::endgroup::"
TAIL_LINES = 60
#: The longest text taken from a container into one log line (a metric value, a task's message).
SHOWN_MAX = 500


def shown(value: object, limit: int = SHOWN_MAX, *, tabs: bool = False) -> str:
    """``value`` as text fit for one line of a task log or a terminal.

    Everything here comes from a container (written by the training code):
    a newline would forge log lines, an escape sequence would drive the
    terminal, a ``::group::`` marker would fold the real log away. Control
    characters and line breaks are escaped (``\\n``, ``\\x1b``), group markers
    defused, and long text cut with an ellipsis. ``tabs`` keeps tabs as they are
    (for a terminal showing whole log lines).
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    if not text.isprintable():
        text = "".join(
            c if c.isprintable() or (tabs and c == "\t") else c.encode("unicode_escape").decode("ascii") for c in text
        )
    if "::" in text:
        text = text.replace(GROUP_START, ": :group::").replace(GROUP_END, ": :endgroup::")
    return text


def decider_of(doc: StateDocument) -> str | None:
    """The task whose progress stands for the job: chief:0, else worker:0, else the first tracked one."""
    for candidate in ("chief:0", "worker:0"):
        if candidate in doc.tasks:
            return candidate
    return next((tid for tid, t in sorted(doc.tasks.items()) if t.tracked), None)


def metrics_text(metrics: Mapping[str, object]) -> str:
    return ", ".join(
        f"{shown(k, 100)}={v:.4g}" if isinstance(v, float) else f"{shown(k, 100)}={shown(v, 100)}"
        for k, v in sorted(metrics.items(), key=lambda kv: str(kv[0]))
    )


def progress_text(progress: Progress | None) -> str:
    """``step 40 epoch 2 (loss=0.31)``, or "" before the first report."""
    if progress is None or progress.step is None:
        return ""
    epoch = f" epoch {shown(progress.epoch, 40)}" if progress.epoch is not None else ""
    text = f"step {shown(progress.step, 40)}{epoch}"
    metrics = metrics_text(progress.metrics)
    return text + (f" ({metrics})" if metrics else "")


def summary_line(doc: StateDocument) -> str:
    """``RUNNING: 2 RUNNING, 1 PENDING | worker:0 step 40 epoch 2 (loss=0.31)``."""
    counts = Counter(t.state for t in doc.tasks.values())
    states = ", ".join(f"{n} {shown(state, 40)}" for state, n in sorted(counts.items()))
    text = f"{shown(doc.app_state, 40)}: " + (states or "no tasks yet")
    decider = decider_of(doc)
    progress = progress_text(doc.tasks[decider].progress) if decider else ""
    return text + (f" | {shown(decider, 100)} {progress}" if progress else "")


def task_state_lines(doc: StateDocument, seen: dict[str, str]) -> list[str]:
    """A line for each task whose state differs from ``seen`` (updated in place)."""
    lines = []
    for task_id, task in sorted(doc.tasks.items()):
        before = seen.get(task_id)
        if before == task.state:
            continue
        seen[task_id] = task.state
        where = f" on {shown(task.host, 255)}" + (f":{shown(task.port, 10)}" if task.port else "") if task.host else ""
        change = f"{shown(before, 40)} -> {shown(task.state, 40)}" if before else shown(task.state, 40)
        extra = f" (exit code {shown(task.exit_code, 20)})" if task.exit_code not in (None, 0) else ""
        lines.append(f"{shown(task_id, 100)} {change}{where}{extra}")
    return lines


def log_groups(title: str, text: str, tail: int = TAIL_LINES) -> list[str]:
    """The last ``tail`` lines of ``text`` between ``::group::title`` and ``::endgroup::``."""
    lines = [shown(line, 2000) for line in text.splitlines()[-tail:]]
    return [f"{GROUP_START}{shown(title, 200)} (last {len(lines)} lines)", *lines, GROUP_END]
