"""The "TonY job" view: the job page of a task instance, served by the api-server, framed by the UI.

Airflow 3.1+ lets a plugin mount a FastAPI app on the api-server (``fastapi_apps``)
and add an iframe tab to a task instance's page (``external_views`` with
``destination: task_instance``). The UI's iframe sends the ``_token`` cookie the UI
set, so Airflow's own security dependencies authenticate the viewer and check read
access to the task instances of the path's DAG, exactly as the REST API does.

The page comes from where ``tony status --html`` gets it (``TonyApplication.job_history``):
the AM's ``history`` through the ResourceManager's proxy while the job runs, the history
the AM left on HDFS once it is gone, through the task's own ``tony_yarn`` connection
(``YarnHook``: HA failover, SPNEGO, no JVM). What the AM or HDFS hold is the job's to write,
so it is read with the history's size cap and rendered escaped (``runtime/page.py``), under
a policy that runs no script and lets only the Airflow UI's origin frame it.

Server-side code, not task code: it reads the task's XComs from the metastore with
``airflow.models`` the way Airflow's own XCom route does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.configuration import conf
from airflow.models.xcom import XComModel
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

# The XComs the operator pushes as soon as it has submitted (``TonyOperator._on_app``).
from airflow_provider_tony.links import XCOM_APPLICATION_ID, XCOM_YARN_CONN_ID
from airflow_provider_tony.plugins.job_view import (
    MOUNT,
    ROUTE,
    VIEW_HREF,
    application_id_of,
    conn_id_of,
    map_index_of,
    render_view,
    response_headers,
)
from airflow_provider_tony.runtime.messages import JobHistory

log = logging.getLogger(__name__)

DEFAULT_CONN_ID = "tony_yarn_default"

#: Reads one XCom of the task instance: ``(key) -> raw value or None``.
XComReader = Callable[[str], object]
#: Reads the job's history: ``(conn_id, app_id) -> (history or None, the AM page's address)``.
HistoryReader = Callable[[str, str], tuple[JobHistory | None, str]]


def xcom_reader(dag_id: str, task_id: str, map_index: str, run_id: str, session: SessionDep) -> XComReader:
    """The task instance's XComs, raw from the metastore (no XCom backend: the operator's are small)."""
    index = _map_index(map_index)

    def read(key: str) -> object:
        query = XComModel.get_many(run_id=run_id, key=key, task_ids=task_id, dag_ids=dag_id, map_indexes=index, limit=1)
        row = session.scalars(query).first()
        found = row[0] if isinstance(row, tuple) else row  # as Airflow's own XCom route unpacks it
        return None if found is None else found.value

    return read


def history_reader() -> HistoryReader:
    """Through the task's connection, as ``tony status --html`` reads it."""

    def read(conn_id: str, app_id: str) -> tuple[JobHistory | None, str]:
        from airflow_provider_tony.hooks.yarn import YarnHook

        hook = YarnHook(conn_id)
        try:
            app = hook.application(app_id)
            return app.job_history(), app.job_page_url()
        finally:
            hook.close()

    return read


def _map_index(text: str) -> int:
    try:
        return map_index_of(text)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None


def _base_url() -> str:
    return conf.get("api", "base_url", fallback="") or ""


def _answer(code: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=code, headers=response_headers(_base_url()))


def create_app() -> FastAPI:
    """The app mounted at ``MOUNT``: one read-only route, behind Airflow's authentication."""
    app = FastAPI(title="TonY job view", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(HTTPException)
    def refused(request: Request, exc: HTTPException) -> Response:
        # Airflow's dependencies refuse with JSON; in a frame a person reads it: plain text, same headers.
        return _answer(exc.status_code, f"{exc.status_code}: {exc.detail}")

    @app.get(
        ROUTE,
        response_class=HTMLResponse,
        dependencies=[Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))],
    )
    def job_view(
        dag_id: str,
        task_id: str,
        map_index: str,
        run_id: str,
        xcom: Annotated[XComReader, Depends(xcom_reader)],
        history_of: Annotated[HistoryReader, Depends(history_reader)],
    ) -> Response:
        index = _map_index(map_index)
        where = f"{dag_id} / {run_id} / {task_id}" + (f" [{index}]" if index >= 0 else "")
        app_id = application_id_of(xcom(XCOM_APPLICATION_ID))
        if app_id is None:
            return _answer(
                404,
                f"no TonY application recorded for {where}: the task has not submitted one (yet), "
                "or it is not a TonyOperator task",
            )
        conn_id = conn_id_of(xcom(XCOM_YARN_CONN_ID), DEFAULT_CONN_ID)
        try:
            history, am_page = history_of(conn_id, app_id)
        except Exception as exc:  # noqa: BLE001 - the cluster's trouble, said in the frame
            log.warning("no history for %s (%s): %s", app_id, conn_id, exc)
            return _answer(502, f"could not read the job {app_id} on connection {conn_id}: {type(exc).__name__}")
        if history is None or history.state is None:
            return _answer(
                404,
                f"{app_id} of {where}: its AM does not serve its page (any more) and its history "
                "is not on HDFS (not written yet, or removed by tony gc)",
            )
        html = render_view(history, now_wall=time.time(), am_page=am_page)
        return HTMLResponse(html, headers=response_headers(_base_url()))

    return app


class TonyJobViewPlugin(AirflowPlugin):
    """Mounts the view's app on the api-server and adds the "TonY job" tab to task instances."""

    name = "tony_job_view"
    fastapi_apps: list[Any] = [{"app": create_app(), "url_prefix": MOUNT, "name": "TonY job view"}]
    external_views: list[Any] = [
        {
            "name": "TonY job",
            "href": VIEW_HREF,
            "destination": "task_instance",
            "url_route": "tony-job",
        }
    ]


__all__ = ["DEFAULT_CONN_ID", "XCOM_APPLICATION_ID", "XCOM_YARN_CONN_ID", "TonyJobViewPlugin", "create_app"]
