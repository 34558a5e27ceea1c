"""The ``tony_yarn`` connection type: its name and its form in the Airflow UI.

Plain data with no imports, because ``get_provider_info()`` returns it and
Airflow calls that in every process while listing providers.
"""

from __future__ import annotations

from typing import Any

CONN_TYPE = "tony_yarn"


def connection_form() -> dict[str, Any]:
    """The ``tony_yarn`` connection form: fields with labels and placeholders."""

    def text(label: str, description: str, fmt: str | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": ["string", "null"]}
        if fmt:
            schema["format"] = fmt
        return {"label": label, "description": description, "schema": schema}

    return {
        "connection-type": CONN_TYPE,
        "hook-class-name": "airflow_provider_tony.hooks.yarn.YarnHook",
        "hook-name": "YARN (TonY)",
        "conn-fields": {
            "hadoop_conf_dir": text("Hadoop conf dir", "Directory with yarn-site.xml/core-site.xml on the workers"),
            "queue": text("Default queue", "YARN queue used when the job names none"),
            "principal": text("Kerberos principal", "e.g. airflow@EXAMPLE.COM (secure clusters only)"),
            "keytab": text("Kerberos keytab path", "Path of the keytab on the Airflow workers", fmt="password"),
            "kerberos": {
                "label": "Kerberos",
                "description": "Force Kerberos on (ticket cache) or off; by default "
                "on when a principal is set or core-site.xml says kerberos",
                "schema": {"type": ["boolean", "null"]},
            },
            "ca_bundle": text("CA bundle", "PEM file to verify the cluster's HTTPS endpoints with"),
            "webhdfs_url": text("WebHDFS URL", "e.g. http://namenode:9870"),
            "webhdfs_user": text("WebHDFS user", "HDFS user for checkpoints and models"),
            "webhdfs_conn_id": text("WebHDFS connection id", "Use a `webhdfs` connection instead of the URL"),
            "base_path": text("HDFS base path", "Where jobs keep checkpoints, models and environments"),
            "namenodes": text(
                "Other NameNodes",
                "JSON: WebHDFS of NameNodes the conf dir does not name, by hdfs:// authority, "
                'e.g. {"hdfs://nn2.example:8020": "http://nn2.example:9870"}',
            ),
            "skein_config": text(
                "skein credentials dir", "TLS credentials for skein's AMs (default: fresh ones for every job)"
            ),
        },
        "ui-field-behaviour": {
            "hidden-fields": ["login", "password", "extra"],
            "relabeling": {
                "host": "ResourceManager host",
                "port": "ResourceManager web port",
                "schema": "Scheme (http or https)",
            },
            "placeholders": {
                "host": "rm.example.com",
                "port": "8088",
                "schema": "http",
                "hadoop_conf_dir": "/etc/hadoop/conf",
                "queue": "default",
                "webhdfs_url": "http://namenode:9870",
                "base_path": "/user/airflow/tony",
            },
        },
    }
