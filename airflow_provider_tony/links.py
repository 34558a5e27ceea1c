"""Extra links on the task page: the job's own page, the YARN application, TensorBoard.

The operator pushes the URLs to XCom as soon as the application is submitted,
so the links work while the job runs, not only after it ended.
"""
from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

XCOM_TRACKING_URL = "tracking_url"
XCOM_TENSORBOARD_URL = "tensorboard_url"
XCOM_JOB_PAGE_URL = "job_page_url"


class _XComLink(BaseOperatorLink):
    xcom_key_name = ""

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        value = XCom.get_value(ti_key=ti_key, key=self.xcom_key_name)
        return str(value) if value else ""


class YarnApplicationLink(_XComLink):
    """The ResourceManager page of the task's YARN application."""

    name = "YARN application"
    xcom_key_name = XCOM_TRACKING_URL


class TensorBoardLink(_XComLink):
    """TensorBoard served by the job's ``tensorboard`` role (empty when there is none)."""

    name = "TensorBoard"
    xcom_key_name = XCOM_TENSORBOARD_URL


class TonyJobLink(_XComLink):
    """The job's page, served by its application master through the ResourceManager's proxy."""

    name = "TonY job"
    xcom_key_name = XCOM_JOB_PAGE_URL
