"""``alerts``: the nightly retrain's deadline alert, and the callback a missed deadline calls."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from types import SimpleNamespace

import pytest

from airflow_provider_tony.alerts import log_missed_deadline, run_deadline


def test_the_alert_calls_the_callback_an_interval_after_the_run_was_queued() -> None:
    alert = run_deadline(timedelta(hours=4), "tonight's retrain", argv=["/venv/bin/airflow", "scheduler"])
    assert alert.interval == timedelta(hours=4)
    assert type(alert.reference).__name__ == "DagRunQueuedAtDeadline"
    assert alert.callback.path == f"{log_missed_deadline.__module__}.{log_missed_deadline.__qualname__}"
    assert alert.callback.kwargs == {"what": "tonight's retrain"}


@pytest.mark.parametrize(
    "argv, left_out",
    [
        (["/venv/bin/airflow", "dags", "test", "tony_nightly_retrain", "2026-11-02"], True),
        (["/venv/bin/airflow", "-v", "dags", "test", "tony_nightly_retrain"], True),
        (["/venv/bin/airflow", "dags", "trigger", "tony_nightly_retrain"], False),
        (["/venv/bin/airflow", "dag-processor"], False),
        (["/venv/bin/python", "dags", "test"], False),
        (["/venv/bin/airflow"], False),
    ],
)
def test_only_airflow_dags_test_leaves_the_alert_out(argv: list[str], left_out: bool) -> None:
    """Airflow 3.3's test run cannot store a deadline (see the module): only there is it left out."""
    assert (run_deadline(timedelta(hours=1), "x", argv=argv) is None) is left_out


def test_a_missed_deadline_is_logged_with_the_run(caplog: pytest.LogCaptureFixture) -> None:
    run = SimpleNamespace(dag_id="tony_nightly_retrain", run_id="scheduled__x")
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.alerts"):
        asyncio.run(log_missed_deadline(what="tonight's retrain", context={"dag_run": run}))
        asyncio.run(log_missed_deadline())
    assert "deadline missed: tonight's retrain is not done (tony_nightly_retrain scheduled__x)" in caplog.text
    assert "deadline missed: the DAG run is not done (a DAG run)" in caplog.text


def test_without_argv_the_process_s_own_command_line_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["/venv/bin/airflow", "dags", "test", "tony_nightly_retrain"])
    assert run_deadline(timedelta(hours=1), "x") is None
    monkeypatch.setattr("sys.argv", ["/venv/bin/airflow", "dag-processor"])
    assert run_deadline(timedelta(hours=1), "x") is not None


def test_the_warning_is_exactly_one_line_naming_what_and_where(caplog: pytest.LogCaptureFixture) -> None:
    run = SimpleNamespace(dag_id="tony_nightly_retrain", run_id="scheduled__x")
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.alerts"):
        asyncio.run(log_missed_deadline(what="tonight's retrain", context={"dag_run": run}))
    assert caplog.messages == ["deadline missed: tonight's retrain is not done (tony_nightly_retrain scheduled__x)"]
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_a_run_without_a_dag_or_run_id_is_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.alerts"):
        asyncio.run(log_missed_deadline(what="w", context={"dag_run": object()}))
    assert caplog.messages == ["deadline missed: w is not done (? ?)"]


def test_a_context_that_is_not_a_dict_is_reported_as_a_dag_run(caplog: pytest.LogCaptureFixture) -> None:
    run = SimpleNamespace(dag_id="d", run_id="r")
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.alerts"):
        asyncio.run(log_missed_deadline(what="w", context=SimpleNamespace(dag_run=run)))
    assert caplog.messages == ["deadline missed: w is not done (a DAG run)"]
