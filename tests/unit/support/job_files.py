"""Stands in for ``TonyHook`` where an operator only renders and reads its job files.

The operator asks the hook for nothing but its HDFS base path and default queue
while it resolves a job YAML and the files beside it, so two class attributes do.
"""

from __future__ import annotations


class FakeHook:
    base_path = "/user/airflow/tony"
    default_queue = "default"
