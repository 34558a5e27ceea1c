"""The quality gate's edges (``runtime/gate.py``) that mutation testing found unguarded.

Each test drives :func:`gate.apply` on the fake HDFS as the operator and
``tony submit`` do: a re-judged rejected model, a record without a figure,
and the third promotion (where an old ``.previous`` must make room).
"""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_tony.runtime import gate
from tests.unit.test_checkpoint import FakeHdfs
from tests.unit.test_gate import MODEL, OTHER_APP, export, model_bytes, spec
from tests.unit.test_operator import APP

RECORD = "/user/airflow/models/digits-published.json"
THIRD = "application_1700000000000_0043"


def _write_record(hdfs: FakeHdfs, metrics: dict[str, object]) -> None:
    record = gate.ModelRecord(OTHER_APP, 60, metrics, MODEL, 100.0)
    hdfs.write(RECORD, data=record.to_json(), overwrite=True)


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
    assert model_bytes(hdfs) == OTHER_APP.encode(), "the published model stayed in place"
    assert model_bytes(hdfs, gate.rejected_dir(MODEL, APP)) == APP.encode(), "the rejected one stayed aside"
    assert hdfs.status(f"{MODEL}.previous", strict=False) is None, "nothing was moved aside"


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
    assert model_bytes(hdfs) == OTHER_APP.encode(), "the worse model was not published"
    assert verdict.model_dir == gate.rejected_dir(MODEL, APP)


def test_the_third_promotion_replaces_the_old_previous(tmp_path: Path) -> None:
    """Each promotion keeps exactly one older model: ``.previous`` is the one just replaced, nothing nested."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    for app, accuracy in ((OTHER_APP, 0.8), (APP, 0.85), (THIRD, 0.9)):
        export(hdfs, tmp_path, app, accuracy)
        verdict = gate.apply(hdfs, spec(), app)
        assert verdict.passed and verdict.model_dir == MODEL, verdict.reason
        assert model_bytes(hdfs) == app.encode()
    assert model_bytes(hdfs, f"{MODEL}.previous") == APP.encode()
    assert hdfs.tree(f"{MODEL}.previous").keys() == {"saved_model.pb", gate.MODEL_METADATA}
    meta = json.loads((hdfs.root / MODEL.lstrip("/") / gate.MODEL_METADATA).read_bytes())
    assert meta["application_id"] == THIRD
