"""The quality gate's edges (``runtime/gate.py``) that mutation testing found unguarded.

Each test drives :func:`gate.apply` on the fake HDFS as the operator and
``tony submit`` do: a re-judged rejected model, a record without a figure,
and the third promotion (each version folder stays as it was published).
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_tony.runtime import gate
from tests.unit.test_checkpoint import FakeHdfs
from tests.unit.test_gate import MODEL, OTHER_APP, export, model_bytes, spec
from tests.unit.test_operator import APP

RECORD = "/user/airflow/models/digits-published.json"
THIRD = "application_1700000000000_0043"


def _write_record(hdfs: FakeHdfs, metrics: dict[str, object]) -> None:
    record = gate.ModelRecord(OTHER_APP, 60, metrics, gate.version_dir(MODEL, OTHER_APP), 100.0)
    hdfs.write(RECORD, data=record.to_json(), overwrite=True)


def _published_bytes(hdfs: FakeHdfs) -> bytes:
    """The bytes of the model the test's own record (``RECORD``) names as published."""
    published = gate.read_record(hdfs, RECORD)
    assert published is not None, "nothing is published"
    return model_bytes(hdfs, published.model_dir)


def test_a_rejected_model_stays_rejected_when_judged_again_after_the_record_is_fixed(tmp_path: Path) -> None:
    """The refusal says "fix or remove the record"; a re-attached task judging again must not publish then."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, spec(record=RECORD), OTHER_APP).passed
    _write_record(hdfs, {"val_accuracy": "0.9"})  # a hand-edited record: text, no figure
    export(hdfs, tmp_path, APP, 0.95)
    refused = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not refused.passed and "has no numeric 'val_accuracy'" in refused.reason
    _write_record(hdfs, {"val_accuracy": 0.5})  # fixed: the rejected model would now pass
    again = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not again.passed and again.model_dir == gate.rejected_dir(MODEL, APP)
    assert _published_bytes(hdfs) == OTHER_APP.encode(), "the published model stayed in place"
    assert model_bytes(hdfs, gate.rejected_dir(MODEL, APP)) == APP.encode(), "the rejected one stayed aside"
    assert hdfs.status(gate.version_dir(MODEL, APP), strict=False) is None, "the rejected one was never published"


def test_a_record_without_a_numeric_figure_is_no_first_model(tmp_path: Path) -> None:
    """A record that exists but holds no figure refuses, however good the candidate: it is not "no model yet"."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, spec(record=RECORD), OTHER_APP).passed
    _write_record(hdfs, {"accuracy": 0.9})  # another metric's name only
    export(hdfs, tmp_path, APP, 0.1)
    verdict = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not verdict.passed and verdict.previous is None
    assert RECORD in verdict.reason and "fix or remove the record" in verdict.reason
    assert verdict.previous_application_id == OTHER_APP
    assert _published_bytes(hdfs) == OTHER_APP.encode(), "the worse model was not published"
    assert verdict.model_dir == gate.rejected_dir(MODEL, APP)


def test_the_third_promotion_leaves_every_earlier_version_as_it_was(tmp_path: Path) -> None:
    """Each promotion adds one never-changing version folder and switches the pointer: nothing nested, nothing lost."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    apps = (OTHER_APP, APP, THIRD)
    for app, accuracy in zip(apps, (0.8, 0.85, 0.9), strict=True):
        export(hdfs, tmp_path, app, accuracy)
        verdict = gate.apply(hdfs, spec(), app)
        assert verdict.passed and verdict.model_dir == gate.version_dir(MODEL, app), verdict.reason
        assert model_bytes(hdfs) == app.encode()
    for app in apps:
        assert model_bytes(hdfs, gate.version_dir(MODEL, app)) == app.encode()
        assert hdfs.tree(gate.version_dir(MODEL, app)).keys() == {"saved_model.pb", gate.MODEL_METADATA}
    pointer = gate.read_record(hdfs, gate.record_path(spec()))
    assert pointer is not None and pointer.application_id == THIRD
