"""What a training container writes, as the rest of the job and the Airflow side see it (issue 27).

The training code is not trusted: its progress reports, its stderr and,
through them, the AM's state document may be huge, mistyped, or full of
newlines, terminal escapes, ``::group::`` markers and markup. Each test plays
such a script and checks the boundary where it is read or shown.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import httpx
import pytest

from airflow_provider_tony.runtime import progress
from airflow_provider_tony.runtime.messages import (
    ExitRecord,
    Heartbeat,
    JobHistory,
    Progress,
    StateDocument,
    TaskSummary,
)
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.web import JobWebServer
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn import logformat
from airflow_provider_tony.yarn.follower import Follower, JobResult

APP = "application_1_0001"
#: skein's gRPC messages are limited to 4 MiB; the executor's put must stay far below it.
GRPC_LIMIT = 4 << 20
#: The caps the provider promises (runtime/messages.py), as numbers so the test also runs on older code.
MAX_METRICS = 64
HOSTILE = "loss\n::group::forged\x1b[2J\x07<script>alert(1)</script>\r\n::endgroup::"


def _hostile_metrics(n: int = 3000) -> dict[str, object]:
    return {f"metric_{i}_{'x' * 200}": "v" * 5000 for i in range(n)} | {HOSTILE: HOSTILE}


# --------------------------------------------------------------------------- progress (point 5)


def test_a_script_reporting_megabytes_of_metrics_cannot_grow_the_executors_messages(tmp_path, monkeypatch) -> None:
    """Before: 3000 metrics of 5 KB went into the heartbeat as they were (15 MB, past skein's gRPC limit)."""
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TONY_PROGRESS_FILE", str(path))
    with pytest.warns(UserWarning, match="only the first"):
        assert progress.report(step="ten", epoch=[1], total_steps=None, **_hostile_metrics())
    got = progress.read(path)
    assert got is not None and got.step is None and got.epoch is None
    assert len(got.metrics) <= MAX_METRICS
    assert all(len(k) <= 100 and len(str(v)) <= 1000 for k, v in got.metrics.items())
    beat = Heartbeat(seq=1, progress=got).to_json()
    assert len(beat) < 256 << 10, len(beat)


def test_a_progress_file_written_past_report_is_bounded_too(tmp_path) -> None:
    """The script may write the file itself: the executor's read applies the caps (before: read whole)."""
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({"step": "ten", "metrics": _hostile_metrics(40)}))  # ~200 KB: over the file cap
    assert progress.read(path) is None
    path.write_text(json.dumps({"step": 7, "epoch": "2", "metrics": {f"m{i}": i for i in range(500)}}))
    got = progress.read(path)
    assert got is not None and got.step == 7 and got.epoch == 2 and len(got.metrics) == MAX_METRICS


def test_an_exit_record_with_a_huge_stderr_tail_stays_small() -> None:
    record = ExitRecord(exit_code=1, stderr_tail=["e" * 100_000] * 5000, progress=Progress(metrics=_hostile_metrics()))
    assert len(record.to_json()) < GRPC_LIMIT // 16


# --------------------------------------------------------------------------- the document on the Airflow side (6)


def _response(body: bytes) -> httpx.Response:
    return httpx.Response(
        200, content=body, headers={"content-type": "application/json"}, request=httpx.Request("GET", "http://x/")
    )


@pytest.mark.parametrize(
    "doc",
    [
        {"application_id": APP, "tasks": [1]},
        {"application_id": APP, "tasks": {"worker:0": {"index": "zero"}}},
        {"application_id": APP, "events": "not a list"},
        {"application_id": APP, "tasks": {f"worker:{i}": {} for i in range(5000)}},
        {"application_id": APP, "diagnostics": "d" * (9 << 20)},
    ],
    ids=["tasks-a-list", "index-a-word", "events-a-string", "too-many-tasks", "too-large"],
)
def test_a_bad_or_oversized_document_counts_as_no_document(doc: dict) -> None:
    """Before: ``"tasks": [1]`` raised AttributeError (the trigger's error event left the application
    running) and a 75 MB document went whole into the trigger event, the XCom and the log."""
    with pytest.raises(web.StateUnavailable):
        web.parse_state(_response(json.dumps(doc).encode()))


def test_a_document_that_stays_bad_ends_in_a_kill_never_a_running_orphan() -> None:
    """No document while YARN says RUNNING is the hung-AM rule: the follower kills the application."""
    from airflow_provider_tony.yarn.follower import AppReport

    follower = Follower(APP, startup_timeout=60, am_stale_timeout=30)
    running = AppReport(app_id=APP, state="RUNNING", final_status="UNDEFINED", diagnostics="", tracking_url="t")
    follower.observe(running, None, 0.0)
    step = follower.observe(running, None, 31.0)
    assert step.action.kills and step.result is not None


def test_texts_in_the_document_are_cut_to_their_caps() -> None:
    doc = StateDocument.from_dict(
        {
            "application_id": APP,
            "events": [HOSTILE * 1000] * 1000,
            "diagnostics": "d" * 100_000,
            "tasks": {"worker:0": {"host": "h" * 10_000, "port": "<b>1</b>", "progress": {"step": "ten"}}},
        }
    )
    assert len(doc.events) <= 200 and all(len(e) <= 1000 for e in doc.events)
    assert len(doc.diagnostics) <= 16000
    task = doc.tasks["worker:0"]
    assert task.port is None and task.progress is not None and task.progress.step is None
    assert task.host is not None and len(task.host) <= 255


def test_the_tensorboard_link_is_built_from_the_application_the_client_follows() -> None:
    """Before: from the document's own ``application_id`` (``../../`` in it led anywhere on the RM)."""
    from airflow_provider_tony.yarn.client import TonyClient

    serving = TaskSummary(state="RUNNING", role="tensorboard", host="node2", port=6006)
    doc = StateDocument(application_id="../../cluster/apps?x=", tasks={"tensorboard:0": serving})
    url = TonyClient(rm_url="http://rm:8088").tensorboard_url(APP, doc)
    assert url == f"http://rm:8088/proxy/{APP}/pages/tensorboard/"


def test_the_xcom_stays_under_64_kib_whatever_the_document_holds() -> None:
    from airflow_provider_tony.operators.tony import TonyOperator

    tasks = {
        f"worker:{i}": {"state": "SUCCEEDED", "host": "h" * 255, "progress": {"metrics": _hostile_metrics(80)}}
        for i in range(1000)
    }
    doc = StateDocument.from_dict(
        {"application_id": APP, "tasks": tasks, "events": [f"checkpoint {'c' * 900} {i}" for i in range(500)]}
    )
    op = TonyOperator(task_id="t", job={"roles": {"worker": {"instances": 1000, "command": ["true"]}}})
    value = op._xcom_result(JobResult(APP, "FINISHED", "SUCCEEDED", "d" * 20000, "t", doc))
    assert len(json.dumps(value, default=str)) < 64 * 1024
    assert value["tasks"]["count"] == 1000


# --------------------------------------------------------------------------- what people see (7, 8)


def _hostile_doc() -> StateDocument:
    return StateDocument.from_dict(
        {
            "application_id": APP,
            "app_state": "RUNNING\n::group::x",
            "events": [f"checkpoint {HOSTILE}"],
            "artefacts": [f"checkpoint {HOSTILE}"],
            "tasks": {
                f"worker:0{HOSTILE}": {
                    "state": "FAILED\x1b[31m",
                    "host": f"node{HOSTILE}",
                    "port": 1,
                    "exit_code": 3,
                    "tracked": True,
                    "progress": {"step": 5, "epoch": 1, "metrics": {HOSTILE: HOSTILE, "loss": 0.5}},
                }
            },
        }
    )


def _one_clean_line(line: str) -> None:
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\x07" not in line, repr(line)
    assert "::group::" not in line and "::endgroup::" not in line, repr(line)


def test_log_lines_from_a_hostile_document_are_one_line_each_without_control_characters() -> None:
    """Before: metric values, task ids and events reached the task log with newlines, escapes and markers."""
    doc = _hostile_doc()
    follower = Follower(APP, startup_timeout=60, am_stale_timeout=60)
    lines = [*follower._progress_lines(doc), logformat.summary_line(doc)]
    assert any("checkpoint" in line for line in lines)
    for line in lines:
        _one_clean_line(line)


def test_a_failed_tasks_log_is_folded_in_one_group_of_clean_lines() -> None:
    lines = logformat.log_groups("worker:0 worker.log", f"first\n{HOSTILE}\nlast\x1b[0m")
    assert lines[0].startswith("::group::") and lines[-1] == "::endgroup::"
    for line in lines[1:-1]:
        _one_clean_line(line)


def test_the_page_escapes_and_survives_mistyped_progress() -> None:
    """Before: ``task.port`` and ``history.attempt`` went into the page raw, and ``step="ten"`` made it 500."""
    history = JobHistory.from_dict(
        {
            "state": _hostile_doc().to_dict()
            | {"tasks": {"tensorboard:0": {"state": "RUNNING", "role": "tensorboard", "host": "n", "port": "1/><b>x"}}},
            "metrics": {"worker:0": [{"step": "ten", "metrics": {"loss": "NaN", "acc": [1]}}, {"step": 3}]},
            "attempt": "<i>2</i>",
        }
    )
    page = render_page(history, now_wall=0.0)
    assert "<b>x" not in page and "<i>2" not in page and "<script>" not in page
    assert "\x1b" not in page and "\x07" not in page and "\\x1b" in page, "control characters shown as escapes"


def test_the_page_survives_numbers_beyond_a_float() -> None:
    """``float(10**400)`` raises: a step or metric that large must not make the page answer 500."""
    history = JobHistory.from_dict(
        {
            "state": {"application_id": APP, "tasks": {"worker:0": {"progress": {"step": 10**400}}}},
            "metrics": {"worker:0": [{"step": 10**400, "metrics": {"loss": 10**400, "acc": 0.5}}, {"step": 2}]},
        }
    )
    assert "acc" in render_page(history, now_wall=0.0)


def test_the_server_sends_a_content_security_policy_and_nosniff() -> None:
    server = JobWebServer(lambda: "<p>page</p>", lambda: b"{}", host="127.0.0.1").start()
    try:
        for route in ("", "state", "history", "nope"):
            try:
                resp = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/{route}")
            except urllib.error.HTTPError as exc:
                resp = exc
            with resp:
                assert resp.headers["X-Content-Type-Options"] == "nosniff"
                assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
                assert "script-src" not in resp.headers["Content-Security-Policy"]
    finally:
        server.stop()


def test_tony_logs_shows_no_raw_control_characters(monkeypatch, capsys) -> None:
    from airflow_provider_tony import cli

    class Client:
        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def application_containers(self, app_id: str) -> list[tuple[str, str]]:
            return [("container_1_0001_01_000002", "node1")]

        def am_state(self, app_id: str) -> None:
            return None

        def container_logs(self, cid: str, host: str) -> dict[str, str]:
            return {"worker.log": f"ok\tline\n{HOSTILE}\n"}

    monkeypatch.setattr(cli, "_client", Client)
    assert cli.main(["logs", APP]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "ok\tline" in out
    assert not any(line.startswith("::group::") for line in out.splitlines())
