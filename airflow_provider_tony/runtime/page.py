"""The job's page for people: one self-contained HTML document, rendered server-side.

A pure function of a ``JobHistory`` (state document + metric history) and the
current wall clock, so the AM, ``tony status --html`` and tests render the
same page. Charts are inline SVG polylines and bars are CSS widths: nothing
is fetched at view time (the cluster often has no internet, and the page is
reached through the ResourceManager's proxy, where relative asset URLs are
fragile). Every value that came from a task (host, metric names, messages)
is escaped.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Iterable

from airflow_provider_tony.runtime.constants import TENSORBOARD_PAGE
from airflow_provider_tony.runtime.messages import GateResult, JobHistory, Progress, StateDocument, TaskSummary
from airflow_provider_tony.runtime.messages_base import finite_number

__all__ = ["render_page"]

#: TensorBoard as skein's UI serves it beside this page (``<rm>/proxy/<app>/pages/tensorboard/``):
#: through the RM's proxy and its ACLs; TensorBoard itself answers only the AM's host.
TENSORBOARD_LINK = f"../{TENSORBOARD_PAGE}/"
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_STATE_COLOURS = {
    "SUCCEEDED": "#2e7d32",
    "RUNNING": "#1565c0",
    "FAILED": "#c62828",
    "LOST": "#c62828",
    "KILLED": "#6d4c41",
    "STOPPED": "#607d8b",
    "REGISTERED": "#f9a825",
    "PENDING": "#757575",
}
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;width:100%} td,th{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left;
vertical-align:top;overflow-wrap:anywhere} th{background:#f3f3f3} .table{overflow-x:auto;max-width:100%}
.metric{display:inline-block;margin-right:.8em;white-space:nowrap} .state{white-space:nowrap}
.note{color:#8a5a00;font-size:.9em}
.state{color:#fff;padding:.1em .5em;border-radius:.3em;font-size:.9em}
.bar{width:12em;height:.8em;background:#e0e0e0;border-radius:.4em;overflow:hidden;display:inline-block}
.bar span{display:block;height:100%;background:#1565c0}
.charts{display:flex;flex-wrap:wrap;gap:1em} .chart{border:1px solid #ddd;padding:.4em}
.legend span{margin-right:1em} .muted{color:#777} pre{white-space:pre-wrap;background:#f7f7f7;padding:.5em}
"""


def _e(value: object) -> str:
    """HTML-escaped text with control characters shown as escapes (``\\x1b``): a task wrote it."""
    text = "" if value is None else str(value)
    if not text.isprintable():
        text = "".join(
            c if c.isprintable() or c in "\n\t" else c.encode("unicode_escape").decode("ascii") for c in text
        )
    return html.escape(text)


def _link(base: str, relative: str) -> str:
    """``relative`` (a link beside the AM's page) from ``base``: the page served elsewhere (the
    Airflow UI's view of the task) still links to the AM's own routes. Escaped for an attribute."""
    return _e(urllib.parse.urljoin(base, relative) if base else relative)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def _progress_cell(prog: Progress | None) -> str:
    if prog is None or (prog.step is None and prog.epoch is None):
        return '<span class="muted">-</span>'
    text = []
    if prog.epoch is not None:
        text.append(f"epoch {prog.epoch}")
    if prog.step is not None:
        text.append(f"step {prog.step}" + (f" of {prog.total_steps}" if prog.total_steps else ""))
    fraction = prog.fraction()
    bar = ""
    if fraction is not None:
        pct = max(0.0, min(100.0, 100 * fraction))
        bar = f'<span class="bar" title="{pct:.0f}%"><span style="width:{pct:.1f}%"></span></span> '
    return bar + _e(", ".join(text))


def _container_attempt(container_id: str | None) -> str:
    """``container_<cluster>_<app>_<attempt>_<n>``: YARN's attempt of the application that ran it."""
    parts = (container_id or "").split("_")
    if len(parts) >= 5 and parts[-2].isdigit():
        return f" (attempt {int(parts[-2])})"
    return ""


def _task_links(task: TaskSummary, history: JobHistory, base: str) -> str:
    links = []
    if task.container_id and task.host and history.nm_http_port:
        url = (
            f"http://{task.host}:{history.nm_http_port}/node/containerlogs/"
            f"{task.container_id}/{history.user or 'nobody'}"
        )
        links.append(f'<a href="{_e(url)}">logs</a>')
    if task.role == "tensorboard" and task.host and task.port and task.state == "RUNNING":
        links.append(f'<a href="{_link(base, TENSORBOARD_LINK)}">TensorBoard</a>')
    return " ".join(links) or '<span class="muted">-</span>'


def _usage_cell(task: TaskSummary) -> str:
    """Peak use beside the role's request, and a note for a request used under half."""
    u = task.usage
    if u is None or not u.samples:
        return '<span class="muted">-</span>'
    parts = []
    if u.peak_rss_bytes is not None:
        of = f" of {u.requested_memory_mib}" if u.requested_memory_mib else ""
        parts.append(f"memory {u.peak_rss_bytes / (1 << 20):.0f}{of} MiB")
    if u.peak_cpu_cores is not None:
        of = f" of {u.requested_vcores}" if u.requested_vcores else ""
        parts.append(f"CPU {u.peak_cpu_cores:.2f}{of} cores")
    if u.peak_gpu_util is not None:
        of = f" of {u.requested_gpus} GPU(s)" if u.requested_gpus else ""
        mem = f", {u.peak_gpu_memory_bytes / (1 << 20):.0f} MiB" if u.peak_gpu_memory_bytes is not None else ""
        parts.append(f"GPU {u.peak_gpu_util:.0f}%{of}{mem}")
    shown = " ".join(f'<span class="metric">{_e(p)}</span>' for p in parts)
    notes = "".join(f'<br><span class="note">{_e(n)}</span>' for n in u.notes)
    return f'<span title="peaks over {u.samples} samples">{shown}</span>{notes}'


def _why(task: TaskSummary) -> str:
    """Why the AM stopped a task ("stopped: chief:0 finished"), under its badge."""
    if task.state in ("STOPPED", "KILLED") and task.message:
        return f'<br><span class="muted">{_e(task.message)}</span>'
    return ""


def _tasks_table(history: JobHistory, base: str) -> str:
    state = history.state
    rows = []
    for task_id, task in sorted((state.tasks if state else {}).items()):
        colour = _STATE_COLOURS.get(task.state, "#555")
        metrics = task.progress.metrics if task.progress else {}
        # One unbreakable item per metric that wraps as a whole: the column fits the page's width.
        shown = " ".join(
            f'<span class="metric">{_e(k)}={v:.4g}</span>'
            if isinstance(v, float)
            else f'<span class="metric">{_e(k)}={_e(v)}</span>'
            for k, v in sorted(metrics.items())
        )
        rows.append(
            f'<tr data-task="{_e(task_id)}"><td>{_e(task_id)}</td>'
            f'<td><span class="state" style="background:{colour}">{_e(task.state)}</span>{_why(task)}</td>'
            f"<td>{_e(task.host or '-')}</td>"
            f"<td>{_e(task.container_id or '-')}{_container_attempt(task.container_id)}</td>"
            f"<td>{_age(task.seconds_since_heartbeat)}</td><td>{_progress_cell(task.progress)}</td>"
            f"<td>{shown or '-'}</td><td>{_usage_cell(task)}</td>"
            f"<td>{_e(task.exit_code)}</td>"
            f"<td>{_task_links(task, history, base)}</td></tr>"
        )
    head = (
        "<tr><th>task</th><th>state</th><th>host</th><th>container (attempt)</th><th>last heartbeat</th>"
        "<th>progress</th><th>metrics</th><th>peak use of request</th><th>exit</th><th>links</th></tr>"
    )
    return f'<div class="table"><table id="tasks">{head}{"".join(rows)}</table></div>'


def _series(history: JobHistory) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """metric -> task -> [(x, y)], x the step (or the report's index when there is none)."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for task_id, points in sorted(history.metrics.items()):
        for i, prog in enumerate(points):
            x = float(prog.step if prog.step is not None else i)
            for name, value in prog.metrics.items():
                y = finite_number(value)
                if y is not None:
                    out.setdefault(name, {}).setdefault(task_id, []).append((x, y))
    return out


def _chart(name: str, lines: dict[str, list[tuple[float, float]]], width: int = 360, height: int = 180) -> str:
    pad = 34
    xs = [x for pts in lines.values() for x, _ in pts]
    ys = [y for pts in lines.values() for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def px(x: float, y: float) -> str:
        return (
            f"{pad + (x - x0) / (x1 - x0) * (width - pad - 8):.1f},"
            f"{height - pad + 8 - (y - y0) / (y1 - y0) * (height - pad):.1f}"
        )

    parts = [
        f'<rect x="{pad}" y="8" width="{width - pad - 8}" height="{height - pad}" fill="none" stroke="#ccc"/>',
        f'<text x="2" y="14" font-size="10">{y1:.4g}</text>',
        f'<text x="2" y="{height - pad + 8}" font-size="10">{y0:.4g}</text>',
        f'<text x="{pad}" y="{height - 8}" font-size="10">step {x0:g}</text>',
        f'<text x="{width - 8}" y="{height - 8}" font-size="10" text-anchor="end">{x1:g}</text>',
    ]
    legend = []
    for i, (task_id, pts) in enumerate(sorted(lines.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        points = " ".join(px(x, y) for x, y in pts)
        if len(pts) == 1:
            x, y = px(*pts[0]).split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>')
        else:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        legend.append(f'<span style="color:{colour}">&#9632; {_e(task_id)}</span>')
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{_e(name)}">{"".join(parts)}</svg>'
    )
    return (
        f'<div class="chart" data-metric="{_e(name)}"><b>{_e(name)}</b><br>{svg}'
        f'<div class="legend">{"".join(legend)}</div></div>'
    )


def _list(items: Iterable[str], empty: str) -> str:
    lis = "".join(f"<li>{_e(item)}</li>" for item in items)
    return f"<ul>{lis}</ul>" if lis else f'<p class="muted">{_e(empty)}</p>'


def _figure(value: float | None, missing: str) -> str:
    return f"{value:.6g}" if value is not None else f'<span class="muted">{_e(missing)}</span>'


def _gate_section(verdict: GateResult | None) -> str:
    """The quality gate's verdict with both figures (absent for a job without a gate)."""
    if verdict is None:
        return ""
    word, colour = ("passed", _STATE_COLOURS["SUCCEEDED"]) if verdict.passed else ("failed", _STATE_COLOURS["FAILED"])
    previous = _e(verdict.previous_model_dir or "-")
    return (
        f'<h2>Quality gate</h2><p id="quality-gate"><span class="state" style="background:{colour}">{word}</span> '
        f"{_e(verdict.reason)}</p><table><tr><th>{_e(verdict.metric)} ({_e(verdict.mode)} is better)</th>"
        "<th>figure</th><th>model</th></tr>"
        f"<tr><td>this run</td><td>{_figure(verdict.value, 'not reported')}</td><td>{_e(verdict.model_dir)}</td></tr>"
        f"<tr><td>published model</td><td>{_figure(verdict.previous, 'none yet')}</td><td>{previous}</td></tr>"
        "</table>"
    )


def _failure_section(state: StateDocument | None) -> str:
    """The typed root cause of a failed job: its kind, task, and for ``out_of_memory`` the figures and the field."""
    failure = state.failure if state is not None else None
    if failure is None or not failure.kind:
        return ""
    parts = [f'<span class="state" style="background:{_STATE_COLOURS["FAILED"]}">{_e(failure.kind)}</span>']
    if failure.task_id:
        parts.append(f"task {_e(failure.task_id)}")
    if failure.peak_mib is not None or failure.requested_mib is not None:
        peak = "-" if failure.peak_mib is None else f"{failure.peak_mib} MiB"
        asked = "-" if failure.requested_mib is None else f"{failure.requested_mib} MiB"
        parts.append(f"peak {_e(peak)} of {_e(asked)} requested")
    if failure.fix_field:
        parts.append(f"raise <code>{_e(failure.fix_field)}</code>")
    parts.append("retryable" if failure.retryable else "not retryable")
    return f'<p id="failure">{" &middot; ".join(parts)}</p>'


def render_page(
    history: JobHistory, *, now_wall: float | None = None, refresh_s: int | None = 5, links_base: str = ""
) -> str:
    """The whole page. ``refresh_s`` reloads it while the job runs (None for a final, static copy);
    ``links_base`` is the AM's page address when the page is served elsewhere (relative links else)."""
    state = history.state
    app_state = state.app_state if state else "UNKNOWN"
    app_id = state.application_id if state else ""
    final = bool(state and state.final) or app_state in ("SUCCEEDED", "FAILED")
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s and not final else ""
    pct = 100 * (state.progress if state else 0.0)
    tensorboard = ""
    tb = state.task("tensorboard:0") if state else None
    if tb is not None and tb.host and tb.port and tb.state == "RUNNING":
        tensorboard = f' &middot; <a href="{_link(links_base, TENSORBOARD_LINK)}">TensorBoard</a>'
    am_age = ""
    if state and state.am_heartbeat is not None and now_wall is not None and not final:
        am_age = f" &middot; AM heartbeat {_age(max(0.0, now_wall - state.am_heartbeat))}"
    charts = "".join(_chart(name, lines) for name, lines in sorted(_series(history).items()))
    charts = f'<div class="charts">{charts}</div>' if charts else '<p class="muted">no metrics reported yet</p>'
    diagnostics = f"<h2>Diagnostics</h2><pre>{_e(state.diagnostics)}</pre>" if state and state.diagnostics else ""
    colour = _STATE_COLOURS.get(app_state, "#555")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{refresh}'
        f"<title>TonY job {_e(history.name or app_id)}</title><style>{_CSS}</style></head><body>"
        f'<h1>TonY job {_e(history.name)} <span class="muted">{_e(app_id)}</span></h1>'
        f'<p><span class="state" id="app-state" style="background:{colour}">{_e(app_state)}</span> '
        f'<span class="bar" title="{pct:.0f}%"><span style="width:{pct:.1f}%"></span></span> {pct:.0f}%'
        f" &middot; Airflow try {_e(history.attempt)}"
        f" &middot; elapsed {state.elapsed if state else 0:.0f}s{am_age}{tensorboard}"
        f' &middot; <a href="{_link(links_base, "state")}">state (JSON)</a>'
        f' &middot; <a href="{_link(links_base, "history")}">history (JSON)</a></p>'
        f"{diagnostics}{_failure_section(state)}{_gate_section(history.gate)}"
        f"<h2>Tasks</h2>{_tasks_table(history, links_base)}"
        f"<h2>Metrics</h2>{charts}"
        f"<h2>Events</h2>{_list(state.events if state else [], 'no events yet')}"
        "</body></html>"
    )
