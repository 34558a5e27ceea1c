"""Airflow plugins of the provider: code that runs in Airflow's own servers, not in tasks.

``job_view`` holds the pure parts of the task instance's "TonY job" view (addresses,
framing policy, what an XCom may name); ``job_view_app`` is its FastAPI app and the
``AirflowPlugin`` that mounts it on the api-server and adds the view to the UI.
"""
