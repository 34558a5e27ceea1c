"""Score each new digits model: scheduled on the model asset the nightly retrain emits.

When ``tony_nightly_retrain`` publishes a model (its ``checkpoint.model_dir``
on HDFS), its task emits an event on ``model_asset("digits")``; this DAG runs
on that event, reads the model's folder from the event's ``extra``, fetches
``model.keras`` over WebHDFS (the ``tony_yarn`` connection's), and scores a
few held-out samples of scikit-learn's digits. A manual run may name a model
folder with the ``model_dir`` param instead.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_provider_tony.assets import model_asset

DIGITS_MODEL = model_asset("digits")

with DAG(
    dag_id="tony_score_new_model",
    schedule=[DIGITS_MODEL],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["tony", "scoring"],
    doc_md=__doc__,
    params={
        "model_dir": Param("", type="string", title="HDFS model folder (manual runs; empty: the event's)"),
        "samples": Param(50, type="integer", minimum=1, maximum=1797, title="Samples to score"),
    },
):

    @task
    def score(**context: Any) -> dict[str, Any]:
        """Load the published model from HDFS and report its accuracy on the last ``samples`` digits."""
        import os

        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the model was written by tf-keras
        import numpy as np
        import tf_keras
        from sklearn.datasets import load_digits

        from airflow_provider_tony.hooks.yarn import YarnHook

        model_dir = context["params"]["model_dir"]
        events = context["triggering_asset_events"].get(DIGITS_MODEL) or []
        if not model_dir and events:
            model_dir = events[-1].extra["model_dir"]
        if not model_dir:
            raise ValueError(
                "no model to score: neither a model asset event nor params.model_dir; "
                "trigger with {'model_dir': '/user/.../models/digits/<date>'}"
            )
        hook = YarnHook()
        try:
            with tempfile.TemporaryDirectory(prefix="tony-score-") as tmp:
                local = Path(tmp) / "model.keras"
                hook.hdfs().download(f"{model_dir.rstrip('/')}/model.keras", str(local))
                model = tf_keras.models.load_model(str(local))
        finally:
            hook.close()
        x, y = load_digits(return_X_y=True)
        n = int(context["params"]["samples"])
        predicted = np.argmax(model.predict((x[-n:] / 16.0).astype("float32"), verbose=0), axis=1)
        accuracy = float(np.mean(predicted == y[-n:]))
        print(f"model {model_dir}: accuracy {accuracy:.3f} on {n} samples")
        return {"model_dir": model_dir, "samples": n, "accuracy": accuracy}

    score()
