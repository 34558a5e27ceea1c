"""progress.keras_callback reports the figures Keras itself shows, with real tf-keras.

Under MultiWorkerMirroredStrategy with two workers tf-keras sums the step
function's outputs across workers before a batch-end callback sees them
(accuracy 1.8 where the progress bar ends the epoch at 0.9). Two worker
processes on localhost with a hand-made TF_CONFIG reproduce that: the first
test proves the set-up shows Keras's summing, the second that the callback's
reports do not, and equal Keras's own epoch figures.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tf_keras")

STEPS = 4
EPOCHS = 2

SCRIPT = textwrap.dedent(
    f"""
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    import tf_keras
    from airflow_provider_tony.runtime import progress

    reports = []
    progress.report = lambda **kw: reports.append(kw) or True  # what the callback hands over
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf_keras.utils.set_random_seed(1)
    with strategy.scope():
        model = tf_keras.Sequential([tf_keras.layers.Dense(8, activation="relu"), tf_keras.layers.Dense(3)])
        model.compile(
            optimizer="adam",
            loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    rng = np.random.default_rng(0)
    x = rng.normal(size=({STEPS} * 32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64") + (x[:, 1] > 1).astype("int64")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat().with_options(options)
    batches = []

    class Batches(tf_keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            batches.append({{k: float(v) for k, v in logs.items()}})

    history = model.fit(
        data, epochs={EPOCHS}, steps_per_epoch={STEPS}, verbose=0,
        callbacks=[Batches(), progress.keras_callback(every_n_steps=2)],
    )
    def plain(d):
        return {{k: (v if isinstance(v, (int, str)) or v is None else float(v)) for k, v in d.items()}}
    with open(sys.argv[1], "w") as fh:
        json.dump({{"reports": [plain(r) for r in reports], "epochs": history.history, "batches": batches}}, fh)
    """
)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("keras")
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config), "CUDA_VISIBLE_DEVICES": ""}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", SCRIPT, str(out / f"{index}.json")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, output in zip(procs, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
    return json.loads(Path(out / "0.json").read_text())


def test_the_set_up_reproduces_keras_summing_workers(run: dict) -> None:
    """Without this the test below would prove nothing: Keras's raw batch logs are summed over 2 workers."""
    for epoch in range(EPOCHS):
        raw = run["batches"][(epoch + 1) * STEPS - 1]  # the raw logs at the epoch's last batch
        for name in ("loss", "accuracy"):
            assert math.isclose(raw[name], 2 * run["epochs"][name][epoch], rel_tol=1e-5), (name, raw, run["epochs"])


def test_batch_end_reports_equal_what_keras_shows(run: dict) -> None:
    reports = run["reports"]
    # A batch-end report carries the running epoch (0-based), an epoch-end one the epochs done.
    batch_reports = [r for r in reports if r["epoch"] == (r["step"] - 1) // STEPS]
    epoch_reports = [r for r in reports if r not in batch_reports]
    assert len(epoch_reports) == EPOCHS
    assert len(batch_reports) == EPOCHS * STEPS // 2  # every 2nd step, in each epoch
    for r in batch_reports:
        assert 0.0 <= r["accuracy"] <= 1.0, r
    for epoch in range(EPOCHS):
        # The batch-end report at an epoch's last step is Keras's figure for that epoch.
        last = next(r for r in batch_reports if r["step"] == (epoch + 1) * STEPS)
        ended = epoch_reports[epoch]
        for name in ("loss", "accuracy"):
            keras = run["epochs"][name][epoch]
            assert math.isclose(last[name], keras, rel_tol=1e-5), (name, epoch, last, keras)
            assert math.isclose(ended[name], keras, rel_tol=1e-5)
