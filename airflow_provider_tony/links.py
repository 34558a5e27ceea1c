"""Extra links on the task page: the job's own page, the YARN application, TensorBoard.

Airflow 3 renders an extra link from the XCom under the link's ``xcom_key``
(by default ``_link_<Class>``, written only when the task process ends). Each
link here names the key the operator pushes as soon as the application is
submitted (as the Databricks provider's run link does), so the links work
while the job runs, in polling mode as well as deferred. ``get_link`` reads
the same key back, so the push Airflow makes at the end rewrites the same
value instead of blanking it.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink, BaseXCom

XCOM_TRACKING_URL = "tracking_url"
XCOM_TENSORBOARD_URL = "tensorboard_url"
XCOM_JOB_PAGE_URL = "job_page_url"
#: Pushed beside the links at submit; the UI's "TonY job" view (plugins/job_view_app.py) reads them.
XCOM_APPLICATION_ID = "application_id"
XCOM_YARN_CONN_ID = "yarn_conn_id"


class _XComLink(BaseOperatorLink):
    xcom_key_name = ""

    @property
    def xcom_key(self) -> str:
        return self.xcom_key_name

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        value = BaseXCom.get_value(ti_key=ti_key, key=self.xcom_key_name)
        return str(value) if value else ""


class YarnApplicationLink(_XComLink):
    """The ResourceManager page of the task's YARN application."""

    name = "YARN application"
    xcom_key_name = XCOM_TRACKING_URL


class TensorBoardLink(_XComLink):
    """TensorBoard served by the job's ``tensorboard`` role, through the ResourceManager's proxy."""

    name = "TensorBoard"
    xcom_key_name = XCOM_TENSORBOARD_URL


class TonyJobLink(_XComLink):
    """The job's page, served by its application master through the ResourceManager's proxy."""

    name = "TonY job"
    xcom_key_name = XCOM_JOB_PAGE_URL
