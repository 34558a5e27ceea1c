"""The example partition's ``degrade``: what makes the nightly retrain's quality gate refuse a day.

The integration test runs the gate on real training; here, without TensorFlow,
the property its margin rests on: every training label of a degraded day is
wrong (a consistent shift, which training learns, not noise a warm-started model
shrugs off), and the held-out labels the gate's figure comes from are untouched.
"""

from __future__ import annotations

import numpy as np

from tests._util import load_script

digits_data = load_script("dags/training/digits_data.py", "digits_data_under_test")


def test_a_degraded_day_has_every_training_label_wrong_and_the_held_out_labels_right() -> None:
    x, y = digits_data._digits("2026-11-03", False)
    xd, yd = digits_data._digits("2026-11-03", True)
    split = int(len(x) * (1 - digits_data.EVAL_SHARE))
    assert np.array_equal(x, xd), "the images are the same day's"
    assert np.all(yd[:split] != y[:split]), "every training label is wrong"
    assert np.array_equal(yd[:split], (y[:split] + 1) % 10), "wrong the same way each time: a mapping training learns"
    assert np.array_equal(yd[split:], y[split:]), "the held-out labels stay right"
