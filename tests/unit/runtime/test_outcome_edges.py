"""Edges of small outcome-deciding functions that mutation testing found unguarded.

The deal's order (largest file first, as the docs say), the exit code -1
(a signal, retried), what a submission refuses before anything reaches YARN
(a file source YARN cannot localise, a new-application answer without an id),
and the token refresher's count of failures in a row (reset by a success).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import skein

from airflow_provider_tony.runtime import token_refresh as tr
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.failure import FailureKind, classify_exit, peer_failure
from airflow_provider_tony.runtime.inputs import InputFile, deal
from airflow_provider_tony.runtime.messages import DelegationToken
from tests.unit.support.rest import FS, app_spec, make


def _sizes(shards: list[list[InputFile]]) -> list[list[int]]:
    return [[f.size for f in shard] for shard in shards]


def test_deal_places_the_largest_files_first_so_small_ones_even_out_the_load() -> None:
    """Sizes 1, 1, 2 on two shards: largest first gives 2 | 1+1; smallest first would give 1+2 | 1."""
    items = [InputFile(f"/p/{name}", size, name) for name, size in (("a", 1), ("b", 1), ("c", 2))]
    got = deal(items, 2)
    assert [sum(s) for s in _sizes(got)] == [2, 2], _sizes(got)
    assert [[f.rel for f in shard] for shard in got] == [["c"], ["a", "b"]]
    many = [InputFile(f"/p/{i:02d}", size, f"{i:02d}") for i, size in enumerate([8, 7, 6, 5, 4])]
    assert sorted(sum(s) for s in _sizes(deal(many, 2))) == [13, 17]


@pytest.mark.parametrize(
    ("code", "kind"), [(-1, FailureKind.SIGNAL), (0 - 15, FailureKind.SIGNAL), (1, FailureKind.CODE)]
)
def test_any_negative_exit_is_a_signal_and_retried(code: int, kind: FailureKind) -> None:
    """Python reports a process ended by signal N as -N: -1 (SIGHUP) as well."""
    assert classify_exit(code, []) is kind
    assert kind.retryable is (code < 0)


def test_a_zero_exit_is_refused_not_classified() -> None:
    """Only a task that exited non-zero is classified (JobTracker.task_exited); 0 passed by mistake
    is named, not taken for a signal (0 is no negative code) or for the code's own failure."""
    with pytest.raises(ValueError, match=r"^exit code 0 is no failure: .* exited non-zero$"):
        classify_exit(0, ["Traceback (most recent call last):"])


@pytest.mark.parametrize("source", ["http://example.com/data.tar.gz", "s3://bucket/env.tar.gz"])
def test_a_file_source_yarn_cannot_localise_is_refused_before_submission(tmp_path: Path, source: str) -> None:
    sub, rm, _fs = make(tmp_path)
    spec = app_spec(tmp_path)
    spec.services["worker"].files["extra"] = skein.File(source=source, type="archive")
    with pytest.raises(ClusterError, match="only local files and hdfs:// sources"):
        sub.submit(spec)
    assert rm.submitted == [], "nothing reached YARN"


def test_a_viewfs_source_is_staged_as_it_is(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    spec = app_spec(tmp_path)
    spec.services["worker"].files["environment"] = skein.File(
        source=FS.replace("hdfs:", "viewfs:") + "/data/env.tar.gz", type="archive"
    )
    assert sub.submit(spec)
    assert len(rm.submitted) == 1


def test_a_new_application_answer_without_an_id_is_an_error(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    handle = rm.handle

    def no_id(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/apps/new-application"):
            return httpx.Response(200, json={"maximum-resource-capability": {}})
        return handle(request)

    sub.http._client = httpx.Client(transport=httpx.MockTransport(no_id))
    with pytest.raises(ClusterError, match="new-application answered without an id"):
        sub.submit(app_spec(tmp_path))
    assert rm.submitted == [] and fs.dirs == {}, "nothing staged, nothing submitted"


def test_a_success_resets_the_refreshers_count_of_failures_in_a_row() -> None:
    """After fail, fail, succeed, the next failure is the first again: a short wait, and an event."""
    events: list[str] = []
    answers: list[Any] = [
        ClusterError("one"),
        ClusterError("two"),
        DelegationToken(token="tok-A", expires=1_000_100.0, max_date=1_000_400.0),
        ClusterError("three"),
    ]

    def obtain() -> DelegationToken:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresher = tr.TokenRefresher(obtain, lambda _msg: None, events.append, clock=lambda: 1_000_000.0)
    assert [refresher.refresh_once() for _ in range(2)] == [tr.retry_delay(1), tr.retry_delay(2)]
    refresher.refresh_once()
    assert refresher.refresh_once() == tr.retry_delay(1), "the count starts again after a success"
    assert refresher.failures == 1
    assert [e.split(":")[0] for e in events if "could not" in e][-1].endswith("(try 1)")


def test_a_peer_failure_quotes_at_most_200_characters_of_the_line() -> None:
    line = "  tensorflow.python.framework.errors_impl.UnavailableError: " + "x" * 400
    found = peer_failure([line])
    assert found is not None
    meaning, quoted = found.split(": ", 1)
    assert quoted == line.strip()[:200] and meaning
