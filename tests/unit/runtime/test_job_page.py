"""The job page's pure parts: the bounded metric history, the HTML, the AM's server, the HTTP parsing."""

from __future__ import annotations

import html
import json
import os
import urllib.error
import urllib.request
from html.parser import HTMLParser

import httpx
import pytest

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.history import MetricHistory, history_paths, points_per_task, write_history
from airflow_provider_tony.runtime.messages import JobHistory, Progress, StateDocument, TaskSummary
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.web import JobWebServer, page_url
from airflow_provider_tony.yarn import http as web
from tests.unit.support.paths import SNAPSHOTS

APP = "application_1700000000000_0042"


def prog(step: int, **metrics: float) -> Progress:
    return Progress(step=step, epoch=step // 10, total_steps=100, time=float(step), metrics=metrics)


# --------------------------------------------------------------------------- history


def test_history_keeps_each_new_report_once_and_copies_it() -> None:
    h = MetricHistory(max_points=10)
    p = prog(1, loss=1.0)
    assert h.add("worker:0", p) and not h.add("worker:0", p), "the same report twice is one point"
    p.metrics["loss"] = 9.0  # the tracker mutates its own object later
    assert h.points["worker:0"][0].metrics == {"loss": 1.0}
    assert not h.add("worker:0", None) and not h.add("worker:0", Progress())


@pytest.mark.parametrize("max_points", [2, 3, 10, 57])
def test_history_stays_bounded_and_keeps_its_first_and_newest_points(max_points: int) -> None:
    h = MetricHistory(max_points=max_points)
    for step in range(1, 1001):
        h.add("worker:0", prog(step, loss=1.0 / step))
        points = h.points["worker:0"]
        assert len(points) <= max_points
        assert points[0].step == 1 and points[-1].step == step
        steps = [p.step for p in points]
        assert steps == sorted(set(steps))


def test_history_refuses_a_bound_that_cannot_draw_a_line() -> None:
    with pytest.raises(ValueError, match="max_points=1"):
        MetricHistory(max_points=1)


def test_the_bound_per_task_shrinks_with_the_number_of_tasks() -> None:
    assert points_per_task(2) == 400 and points_per_task(100) == 40 and points_per_task(100_000) == 2


def test_history_paths_beside_the_checkpoints_and_in_the_history_folder() -> None:
    assert history_paths(APP, "/ckpt/run", "/user/a/tony/history") == [
        f"/ckpt/run/_tony/{APP}.json",
        f"/user/a/tony/history/{APP}.json",
    ]
    assert history_paths(APP, None, None) == []


def test_write_history_writes_the_document_to_every_path() -> None:
    class FakeHdfs:
        def __init__(self) -> None:
            self.files: dict[str, bytes] = {}
            self.dirs: list[str] = []

        def makedirs(self, path: str) -> None:
            self.dirs.append(path)

        def write(self, path: str, data: bytes, overwrite: bool) -> None:
            assert overwrite
            self.files[path] = data

    client, doc = FakeHdfs(), JobHistory(state=StateDocument(application_id=APP), metrics={"w:0": [prog(3)]})
    written = write_history(client, ["/a/x.json", "/b/x.json"], doc)
    assert written == ["/a/x.json", "/b/x.json"] and client.dirs == ["/a", "/b"]
    assert JobHistory.from_json(client.files["/b/x.json"]) == doc


# --------------------------------------------------------------------------- page


def history(final: bool = False) -> JobHistory:
    tasks = {
        "worker:0": TaskSummary(
            state="RUNNING",
            role="worker",
            index=0,
            host="node1",
            port=4000,
            container_id="container_1_0042_01_000002",
            seconds_since_heartbeat=1.2,
            progress=prog(40, loss=0.25, accuracy=0.9),
        ),
        "tensorboard:0": TaskSummary(
            state="RUNNING", role="tensorboard", host="node2", port=6006, container_id="container_1_0042_01_000003"
        ),
        "worker:1": TaskSummary(state="FAILED", role="worker", index=1, host="<b>evil</b>", exit_code=3),
    }
    state = StateDocument(
        application_id=APP,
        app_state="SUCCEEDED" if final else "RUNNING",
        final=final,
        progress=0.4,
        am_heartbeat=1000.0,
        tasks=tasks,
        events=["worker:0 uploaded checkpoint step 30", "<script>alert(1)</script>"],
        diagnostics="worker:1 exited with code 3" if final else "",
    )
    return JobHistory(
        state=state,
        name="nightly",
        user="alice",
        nm_http_port="8042",
        attempt=2,
        metrics={
            "worker:0": [
                prog(10, loss=1.0),
                prog(20, loss=0.5, accuracy=0.8),
                prog(40, loss=0.25, accuracy=0.9, bad=float("nan")),
            ]
        },
    )


def test_the_page_shows_tasks_progress_charts_events_and_links() -> None:
    page = render_page(history(), now_wall=1003.0)
    assert page.startswith("<!doctype html>") and "<title>TonY job nightly</title>" in page
    assert '<meta http-equiv="refresh" content="5">' in page, "a running job's page reloads itself every 5 s"
    assert 'data-task="worker:0"' in page and "step 40 of 100" in page and "width:40.0%" in page
    assert "AM heartbeat 3s ago" in page and "Airflow try 2" in page
    assert "container_1_0042_01_000002 (attempt 1)" in page
    assert 'href="http://node1:8042/node/containerlogs/container_1_0042_01_000002/alice"' in page
    assert 'href="../tensorboard/">TensorBoard' in page, "through the RM's proxy, beside this page"
    assert 'data-metric="loss"' in page and 'data-metric="accuracy"' in page and "<polyline" in page
    assert 'data-metric="bad"' not in page, "a NaN is not drawn"
    assert "worker:0 uploaded checkpoint step 30" in page


def test_the_page_escapes_what_tasks_wrote() -> None:
    page = render_page(history())
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "<b>evil</b>" not in page


def test_a_final_page_is_static_and_shows_the_diagnostics() -> None:
    page = render_page(history(final=True), now_wall=5000.0)
    assert 'http-equiv="refresh"' not in page and "AM heartbeat" not in page
    assert "worker:1 exited with code 3" in page


def test_an_empty_history_still_renders() -> None:
    page = render_page(JobHistory())
    assert "UNKNOWN" in page and "no metrics reported yet" in page


# --------------------------------------------------------------------------- the AM's server


def test_the_server_serves_what_was_published_and_records_the_ack() -> None:
    server = JobWebServer(lambda: "<p>page</p>", lambda: b'{"metrics": {}}', host="127.0.0.1").start()
    try:
        base = f"http://127.0.0.1:{server.port}/"
        server.publish(b'{"seq": 3}')
        with urllib.request.urlopen(base + "state") as resp:
            assert resp.headers["Content-Type"] == "application/json" and json.load(resp) == {"seq": 3}
        with urllib.request.urlopen(base + "history") as resp:
            assert json.load(resp) == {"metrics": {}}
        with urllib.request.urlopen(base) as resp:
            assert resp.read() == b"<p>page</p>"
        assert not server.acknowledged.is_set()
        # Before the verdict an ack proves no reader (any process reaching the port could send it).
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "ack")
        assert refused.value.code == 409 and not server.acknowledged.is_set()
        server.publish(b'{"seq": 4, "final": true}', final=True)
        urllib.request.urlopen(base + "ack").close()
        assert server.acknowledged.is_set()
    finally:
        server.stop()


def test_page_url_is_the_tracking_url_plus_skeins_prefix_and_route() -> None:
    assert page_url(f"http://rm:8088/proxy/{APP}/") == f"http://rm:8088/proxy/{APP}/pages/tony/"
    assert web.job_page_url("http://rm:8088/", APP) == f"http://rm:8088/proxy/{APP}/pages/tony/"


# --------------------------------------------------------------------------- parsing on the submitting side


def test_parse_app_report_reads_the_rm_rest_answer() -> None:
    rep = web.parse_app_report(
        {
            "app": {
                "state": "FINISHED",
                "finalStatus": "FAILED",
                "diagnostics": "boom",
                "progress": 40.0,
                "applicationTags": "b,a",
                "name": "n",
            }
        },
        APP,
        "url",
    )
    assert (rep.state, rep.final_status, rep.diagnostics, rep.progress, rep.tags, rep.tracking_url) == (
        "FINISHED",
        "FAILED",
        "boom",
        0.4,
        ["a", "b"],
        "url",
    )
    with pytest.raises(ClusterError, match="has no 'app.state'"):
        web.parse_app_report({"RemoteException": {}}, APP, "url")


def test_parse_state_tells_no_document_from_an_unreachable_am() -> None:
    doc = StateDocument(application_id=APP, seq=4)
    ok = httpx.Response(200, json=doc.to_dict(), request=httpx.Request("GET", "http://x/state"))
    assert web.parse_state(ok) == doc
    empty = httpx.Response(200, json={}, request=httpx.Request("GET", "http://x/state"))
    assert web.parse_state(empty) is None
    for bad in (
        httpx.Response(
            200,
            text="<html>RM page</html>",
            headers={"content-type": "text/html"},
            request=httpx.Request("GET", "http://x/state"),
        ),
        httpx.Response(502, request=httpx.Request("GET", "http://x/state")),
    ):
        with pytest.raises(web.StateUnavailable):
            web.parse_state(bad)


def test_an_rm_that_forgot_the_application_is_named_as_such() -> None:
    resp = httpx.Response(404, request=httpx.Request("GET", "http://rm/x"))
    error = web.rm_error("http://rm", APP, httpx.HTTPStatusError("404", request=resp.request, response=resp))
    assert "does not know" in str(error) and "forgotten" in str(error)


# --------------------------------------------------------------------------- SPNEGO for the follower


@pytest.mark.parametrize("challenge, retried", [("Negotiate", True), ("Basic realm=x", False), (None, False)])
def test_the_followers_spnego_answers_a_negotiate_challenge_only(
    monkeypatch: pytest.MonkeyPatch, challenge: str | None, retried: bool
) -> None:
    from airflow_provider_tony.yarn.kerberos import HttpxSpnegoAuth

    seen: list[str | None] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        if challenge and request.headers.get("Authorization") is None:
            return httpx.Response(401, headers={"WWW-Authenticate": challenge})
        return httpx.Response(200, json={"app": {"state": "RUNNING"}})

    auth = HttpxSpnegoAuth(lambda: "creds")
    monkeypatch.setattr(auth, "token", lambda host: f"token-for-{host}")
    with httpx.Client(transport=httpx.MockTransport(handle), auth=auth) as client:
        resp = client.get("http://rm.example:8088/ws/v1/cluster/apps/x")
    if retried:
        assert seen == [None, "Negotiate token-for-rm.example"] and resp.status_code == 200
    else:
        assert seen == [None] and resp.status_code == (401 if challenge else 200)


def test_a_kerberized_client_follows_with_spnego() -> None:
    from airflow_provider_tony.yarn.client import TonyClient
    from airflow_provider_tony.yarn.kerberos import HttpxSpnegoAuth

    client = TonyClient(rm_url="http://rm:8088", kerberos=True, ca_bundle="/etc/ca.pem")
    assert isinstance(client.http_settings.auth, HttpxSpnegoAuth) and client.http_settings.verify == "/etc/ca.pem"
    assert TonyClient(rm_url="http://rm:8088", kerberos=False).http_settings.auth is None


class _Markup(HTMLParser):
    """Every element and attribute name the browser would build from the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)


INJECTED_NAME = 'acc"><img src=x onerror=alert(1)>'
INJECTED_VALUE = "<script>steal()</script>"
ATTRIBUTE_BREAK = 'loss" onmouseover="alert(2)'


def test_metric_names_and_values_from_a_training_script_cannot_add_markup() -> None:
    """Metric names and values come from user code (progress.report) and the page is served on
    the ResourceManager's origin: in the task table, the chart titles and their attributes, they
    are text, never elements or attributes."""
    job = history()
    job.state.tasks["worker:0"].progress = prog(40, **{INJECTED_NAME: 0.5, "note": INJECTED_VALUE})
    job.metrics["worker:0"].append(prog(50, **{INJECTED_NAME: 0.6, ATTRIBUTE_BREAK: 0.1}))
    job.metrics["worker:0"].append(prog(60, **{INJECTED_NAME: 0.7, ATTRIBUTE_BREAK: 0.05}))
    page = render_page(job)
    parsed = _Markup()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img"}, parsed.tags
    assert not parsed.attributes & {"onerror", "onmouseover", "src"}, parsed.attributes
    assert INJECTED_VALUE not in page and INJECTED_NAME not in page and ATTRIBUTE_BREAK not in page
    # ... and still shown, as text: in the table and as a chart
    assert html.escape(INJECTED_VALUE) in page
    assert f'data-metric="{html.escape(INJECTED_NAME)}"' in page
    assert f"<b>{html.escape(ATTRIBUTE_BREAK)}</b>" in page


@pytest.mark.parametrize("kind", ["running", "final", "empty", "ended", "nostate"])
def test_the_page_is_exactly_the_reviewed_one(kind: str) -> None:
    """The whole page for a job with every kind of content (running, final, nothing yet), against a
    reviewed copy: a change to any cell, link, chart coordinate or escape shows up here as a diff to
    review. After an intended change: UPDATE_SNAPSHOTS=1 pytest tests/unit/runtime/test_job_page.py, then
    read the diff."""
    if kind == "empty":
        job = JobHistory(state=StateDocument(application_id=APP, app_state="ACCEPTED", elapsed=3.4), name="n")
    elif kind == "ended":  # YARN's last word without the AM's final document: still a static page
        job = JobHistory(state=StateDocument(application_id=APP, app_state="FAILED", am_heartbeat=1002.6), name="n")
    elif kind == "nostate":
        job = JobHistory()
    else:
        job = history(final=kind == "final")
        job.metrics["worker:1"] = [prog(10, loss=2.0), prog(30, loss=1.5)]  # a second line in the loss chart
        job.metrics["worker:0"].append(prog(50, **{INJECTED_NAME: 0.5, "note": 1.0}))
        assert job.state is not None
        job.state.am_heartbeat = 1002.6  # less than a second ago
        job.state.tasks["worker:0"].progress = Progress(
            step=40, total_steps=100, metrics={"phase": "eval", "acc": 0.123456}
        )
        job.state.tasks["chief:0"] = TaskSummary(state="RESTARTING", role="chief", container_id="container_1_0042_01_9")
        if kind == "final":
            job.user = None  # container log links then name nobody
    page = render_page(job, now_wall=1003.0, refresh_s=7)
    path = SNAPSHOTS / f"job_page_{kind}.html"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(page)
    assert page == path.read_text(), f"the page differs from {path}; review, then UPDATE_SNAPSHOTS=1"


def test_a_task_stopped_because_the_chief_finished_reads_so_on_the_page() -> None:
    """Not a red KILLED badge on a good run: STOPPED, grey, with the AM's reason under it."""
    stopped = TaskSummary(state="STOPPED", role="worker", index=1, message="stopped: chief:0 finished")
    page = render_page(JobHistory(state=StateDocument(app_state="SUCCEEDED", tasks={"worker:1": stopped})))
    row = page.split('data-task="worker:1"')[1].split("</tr>")[0]
    assert 'style="background:#607d8b">STOPPED</span><br><span class="muted">stopped: chief:0 finished' in row
