"""A day's partition of the digits as TFRecords on HDFS, and the reader the training scripts share.

The writer stands for whatever lands a day's data on HDFS: it takes
scikit-learn's bundled digits (nothing is downloaded), shuffles them with a
seed from the day, and writes ``train/part-0000N.tfrecord`` files plus a
held-out ``eval/part-00000.tfrecord`` under the day's folder, with a
``_SUCCESS`` marker, published at once (written under a temporary name, then
renamed), so a job never sees half a partition. ``degrade`` shifts every
training label by one digit (a labelling bug upstream): a model trained on it,
even one warm-started from a good model, scores far worse on the held-out
file, whose labels stay right.

Each record is a ``tf.train.Example`` with ``x`` (64 floats in [0, 1]) and
``y`` (the digit). TensorFlow is imported inside the functions: the DAG file
that imports this module must stay cheap to parse.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

TRAIN_DIR = "train"
EVAL_DIR = "eval"
#: Share of the digits kept out of training, for the evaluation.
EVAL_SHARE = 0.2


def partition_path(base_path: str, day: str) -> str:
    """Where the day's partition lives: ``<base_path>/data/digits/dt=<day>``."""
    return f"{base_path.rstrip('/')}/data/digits/dt={day}"


def _digits(day: str, degrade: bool) -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    seed = int(hashlib.sha256(day.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    x, y = (x[order] / 16.0).astype("float32"), y[order].astype("int64")
    if degrade:
        split = int(len(x) * (1 - EVAL_SHARE))
        # A labelling bug upstream: every training label is off by one digit. A shuffle of the
        # labels would not do: a model warm-started from a good one keeps most of its accuracy
        # through a few epochs of noise, while a consistent wrong mapping is learnt and scored.
        y[:split] = (y[:split] + 1) % 10
    return x, y


def _write(path: str, x: Any, y: Any) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(path) as writer:
        for features, label in zip(x, y, strict=True):
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "x": tf.train.Feature(float_list=tf.train.FloatList(value=features.tolist())),
                        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                    }
                )
            )
            writer.write(example.SerializeToString())


def write_local(folder: str, day: str, train_files: int = 4, degrade: bool = False) -> dict[str, int]:
    """The partition's files in a local ``folder``; returns records per file name (relative)."""
    x, y = _digits(day, degrade)
    split = int(len(x) * (1 - EVAL_SHARE))
    counts: dict[str, int] = {}
    os.makedirs(os.path.join(folder, TRAIN_DIR), exist_ok=True)
    os.makedirs(os.path.join(folder, EVAL_DIR), exist_ok=True)
    for i in range(train_files):
        rel = f"{TRAIN_DIR}/part-{i:05d}.tfrecord"
        _write(os.path.join(folder, rel), x[i:split:train_files], y[i:split:train_files])
        counts[rel] = len(range(i, split, train_files))
    rel = f"{EVAL_DIR}/part-00000.tfrecord"
    _write(os.path.join(folder, rel), x[split:], y[split:])
    counts[rel] = len(x) - split
    open(os.path.join(folder, "_SUCCESS"), "w").close()  # noqa: SIM115 - an empty marker
    return counts


def write_partition(client: Any, remote: str, day: str, train_files: int = 4, degrade: bool = False) -> dict[str, int]:
    """Write the day's partition to ``remote`` on HDFS (``client``: a WebHDFS client); returns records per file.

    An existing partition is replaced whole; the copy ``publish`` keeps of it (``<remote>.previous``)
    is removed, or a glob over the days (``dt=*``) would read it too.
    """
    from airflow_provider_tony.runtime.hdfs_io import publish

    with tempfile.TemporaryDirectory(prefix="digits-partition-") as tmp:
        counts = write_local(tmp, day, train_files, degrade)
        publish(client, tmp, remote, f"writer-{os.getpid()}")
    client.delete(f"{remote}.previous", recursive=True)
    return counts
