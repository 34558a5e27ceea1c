"""The example's TFRecord reader (dags/training/tfrecords.py) against files TensorFlow itself wrote.

The PyTorch nightly retrain reads the digits partition through it instead of TensorFlow, so it must
give back exactly what ``digits_data.py`` wrote (every record, every value, in order) and refuse a
damaged file rather than return fewer records.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._util import load_script

digits_data = load_script("dags/training/digits_data.py", "digits_data_for_tfrecords")
tfrecords = load_script("dags/training/tfrecords.py", "tfrecords_under_test")


@pytest.fixture(scope="module")
def partition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("partition")
    digits_data.write_local(str(folder), "2026-11-02", train_files=2)
    return folder


def test_the_reader_gives_back_what_tensorflow_wrote(partition: Path) -> None:
    x, y = digits_data._digits("2026-11-02", False)
    split = int(len(x) * (1 - digits_data.EVAL_SHARE))
    rows = list(tfrecords.examples([partition / "train" / "part-00001.tfrecord"]))
    assert len(rows) == len(range(1, split, 2))
    assert np.array_equal(np.asarray([r["x"] for r in rows], dtype="float32"), x[1:split:2])
    assert [r["y"] for r in rows] == [[int(v)] for v in y[1:split:2]]
    held_out = list(tfrecords.examples([partition / "eval" / "part-00000.tfrecord"]))
    assert [r["y"][0] for r in held_out] == [int(v) for v in y[split:]]


def test_other_feature_kinds_and_negative_ints(tmp_path: Path) -> None:
    import tensorflow as tf

    path = tmp_path / "kinds.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        feature = {
            "b": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"one", b""])),
            "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[-3, 0, 2**40])),
            "e": tf.train.Feature(float_list=tf.train.FloatList(value=[])),
        }
        writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    assert list(tfrecords.examples([path])) == [{"b": [b"one", b""], "i": [-3, 0, 2**40], "e": []}]


def test_a_damaged_file_is_an_error_naming_the_record(partition: Path, tmp_path: Path) -> None:
    data = bytearray((partition / "eval" / "part-00000.tfrecord").read_bytes())
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(bytes(data[:-10]))
    with pytest.raises(tfrecords.TFRecordError, match=r"cut\.tfrecord: record 359 is cut short"):
        list(tfrecords.records(cut))
    flipped = tmp_path / "flipped.tfrecord"
    data[40] ^= 0xFF  # inside the first record's payload
    flipped.write_bytes(bytes(data))
    with pytest.raises(tfrecords.TFRecordError, match=r"record 0's data fails its CRC"):
        list(tfrecords.records(flipped))
