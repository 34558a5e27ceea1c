"""HDFS quota and permission refusals: recognised, exit 77, judged ``hdfs_refused`` and not retried.

The refusal is read from what the ``hdfs`` package raises (``HdfsError`` with
the NameNode's exception name) or from an error's text alone; the uploader
stops at the first refusal (no upload_failure_window wait), the task exits 77
with the path and HDFS's answer, and the AM's tracker makes it the root cause,
not retryable, even beside a lost task.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hdfs import HdfsError

from airflow_provider_tony.runtime.checkpoint import CheckpointSync
from airflow_provider_tony.runtime.errors import RenameFailed
from airflow_provider_tony.runtime.executor import after_final_flush
from airflow_provider_tony.runtime.failure import FailureKind, classify_exit
from airflow_provider_tony.runtime.hdfs_io import with_retries
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, refusal, refused_line
from tests.unit.support.hdfs import REMOTE, FakeHdfs, make_sync, write_ckpt
from tests.unit.support.tracker import CODE_GRACE, T0, failed, make_tracker, start

QUOTA = (
    "The DiskSpace quota of /user/alice/job/ckpts is exceeded: quota = 1048576 B = 1 MB "
    "but diskspace consumed = 134217728 B = 128 MB"
)


@pytest.mark.parametrize(
    ("exc", "name"),
    [
        (HdfsError(QUOTA, exception="DSQuotaExceededException"), "DSQuotaExceededException"),
        (HdfsError("The NameSpace quota ... is exceeded", exception="NSQuotaExceededException"), "NSQuotaExceeded"),
        (HdfsError("Permission denied: user=bob, access=WRITE", exception="AccessControlException"), "AccessControl"),
        (RuntimeError("RemoteException: org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: x"), "DSQuota"),
    ],
)
def test_a_quota_or_permission_answer_is_a_refusal_naming_hdfs_exception(exc: Exception, name: str) -> None:
    answer = refusal(exc)
    assert answer is not None and name in answer


def test_a_refusal_wrapped_by_a_rename_is_still_one() -> None:
    cause = HdfsError(QUOTA, exception="DSQuotaExceededException")
    try:
        raise RenameFailed("/a.tmp", "/a", cause) from cause
    except RenameFailed as wrapped:
        answer = refusal(wrapped)
    assert answer is not None and "DSQuotaExceededException" in answer


@pytest.mark.parametrize(
    "exc",
    [
        HdfsError("Connection refused", exception=None),
        HdfsError("Operation category WRITE is not supported in state standby", exception="StandbyException"),
        HdfsError("Name node is in safe mode", exception="SafeModeException"),
        ConnectionError("NameNode unreachable"),
    ],
)
def test_an_outage_is_no_refusal(exc: Exception) -> None:
    assert refusal(exc) is None


LINE = refused_line(REMOTE, f"DSQuotaExceededException: {QUOTA}")


def test_exit_77_with_the_refusal_line_is_hdfs_refused_and_not_retryable() -> None:
    kind = classify_exit(HDFS_REFUSED_EXIT_CODE, ["noise", LINE])
    assert kind is FailureKind.HDFS_REFUSED and not kind.retryable and not kind.loss
    assert classify_exit(HDFS_REFUSED_EXIT_CODE, ["a script's own exit 77"]) is FailureKind.CODE
    assert classify_exit(HDFS_REFUSED_EXIT_CODE, [LINE], [77]) is FailureKind.RETRYABLE_EXIT
    assert classify_exit(75, [LINE]) is FailureKind.RETRYABLE_EXIT


def test_the_last_flush_refused_exits_77_with_the_path() -> None:
    code, tail = after_final_flush(False, 0, ["done"], REMOTE, "HdfsError: ...", LINE)
    assert code == HDFS_REFUSED_EXIT_CODE and tail[-1] == LINE and REMOTE in tail[-1]
    assert after_final_flush(False, 0, [], REMOTE, "HdfsError: down", None)[0] == 75
    assert after_final_flush(False, 3, [], REMOTE, "x", LINE)[0] == 3, "a failed script keeps its own code"


class QuotaHdfs(FakeHdfs):
    def upload(self, *args: object, **kwargs: object) -> None:
        self.calls.append(("upload", str(args[0])))
        raise HdfsError(QUOTA, exception="DSQuotaExceededException")


@pytest.mark.timeout(60)  # without the refusal rule the uploader would wait out its hour-long window
def test_the_uploader_stops_at_the_first_refusal_naming_the_folder(tmp_path: Path) -> None:
    fake = QuotaHdfs(tmp_path / "hdfs")
    local = tmp_path / "local"
    local.mkdir()
    fatal: list[str] = []
    sync: CheckpointSync = make_sync(fake, local, [], fatal, window=3600.0)
    write_ckpt(local, 20)
    sync.run()  # poll_interval 0: returns once it gave up; far inside the hour-long window
    assert len(fatal) == 1 and fatal[0].startswith("HDFS refused " + REMOTE), fatal
    assert "DSQuotaExceededException" in fatal[0] and sync.refused == fatal[0]
    assert fake.count("upload") == 1, "a refusal is not retried"
    assert sync.flush(timeout=3600.0) is False and fake.count("upload") == 2


def test_with_retries_does_not_retry_a_refusal() -> None:
    calls: list[int] = []

    def refuse() -> None:
        calls.append(1)
        raise HdfsError("Permission denied", exception="AccessControlException")

    with pytest.raises(HdfsError):
        with_retries("mkdir /x", refuse, attempts=5, first_delay=0.0)
    assert len(calls) == 1


def test_the_tracker_makes_a_refusal_the_cause_not_retryable_even_beside_a_lost_peer() -> None:
    tr = make_tracker({"worker": 3}, max_restarts=2)
    start(tr)
    tr.container_ended("worker:2", "container lost with its node", T0 + 3)
    tr.exited("worker:0", HDFS_REFUSED_EXIT_CODE, [LINE], T0 + 3)
    verdict = failed(tr.check(T0 + 3 + CODE_GRACE), "worker:0 exited with code 77", REMOTE, retryable=False)
    assert verdict.cause is FailureKind.HDFS_REFUSED and "DSQuotaExceededException" in verdict.diagnostics
    assert tr.restarts == [], "no restart inside the application for a refusal"
