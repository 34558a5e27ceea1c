"""Airflow Assets for models a TonY job publishes and data it trains on, so either can schedule DAGs.

A job's ``checkpoint.model_dir`` usually changes with every run (one folder
per day), so the asset names the *model* (``digits``), not a folder: every
successful run of a producing task emits an event on the same asset, and the
event's ``extra`` says where this run's model is (``model_dir``) and how it
came about (application id, step, metrics). A consumer DAG scheduled on
``model_asset("digits")`` reads ``model_dir`` from its triggering event.
"""

from __future__ import annotations

import re

from airflow.sdk import Asset

MODEL_SCHEME = "tony-model"
DATA_SCHEME = "tony-data"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def model_asset(name: str) -> Asset:
    """The Asset for the model called ``name`` (letters, digits, ``_ . -``)."""
    if not _NAME.match(name):
        raise ValueError(
            f"model name {name!r} must be 1-100 letters, digits, '_', '.' or '-' starting with a "
            "letter or digit; e.g. model_asset('digits')"
        )
    return Asset(name=f"tony_model_{name}", uri=f"{MODEL_SCHEME}://{name}")


def data_asset(name: str) -> Asset:
    """The Asset for the data set called ``name``: a writer emits an event per partition it lands on HDFS
    (``extra``: ``day`` and ``path``), and a training DAG scheduled on it trains on that partition."""
    if not _NAME.match(name):
        raise ValueError(
            f"data set name {name!r} must be 1-100 letters, digits, '_', '.' or '-' starting with a "
            "letter or digit; e.g. data_asset('digits')"
        )
    return Asset(name=f"tony_data_{name}", uri=f"{DATA_SCHEME}://{name}")


__all__ = ["DATA_SCHEME", "MODEL_SCHEME", "data_asset", "model_asset"]
