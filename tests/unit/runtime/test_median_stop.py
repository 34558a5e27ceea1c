"""The median-stopping rule at its boundaries (runtime/median_stop.py): ties, too few finished trials,
missing steps, the grace step, values that are not numbers, min against max, and untrusted curve files."""

from __future__ import annotations

import json
import math

import pytest

from airflow_provider_tony.runtime.median_stop import (
    MAX_CURVE_BYTES,
    MAX_CURVE_POINTS,
    Rule,
    curve_document,
    curve_of,
    decide,
    median,
    parse_curve,
    value_at,
)
from airflow_provider_tony.runtime.messages import EarlyStop, Progress

LOSS = Rule(metric="loss", mode="min")
ACC = Rule(metric="accuracy", mode="max")


def test_value_at_takes_the_newest_point_at_or_before_the_step() -> None:
    curve = {0: 3.0, 10: 2.0, 20: 1.0}
    assert value_at(curve, 10) == 2.0  # exactly at a point
    assert value_at(curve, 19) == 2.0  # between points: the newest before
    assert value_at(curve, 500) == 1.0  # past the end: its last value
    assert value_at({5: 1.0}, 4) is None  # nothing at or before: left out


@pytest.mark.parametrize(
    ("values", "expected"),
    [([3.0], 3.0), ([1.0, 5.0, 2.0], 2.0), ([4.0, 1.0], 2.5), ([1.0, 2.0, 3.0, 10.0], 2.5)],
)
def test_median_of_odd_and_even_counts(values: list[float], expected: float) -> None:
    assert median(values) == expected


def test_strictly_worse_than_the_median_stops_with_every_figure() -> None:
    stop = decide(LOSS, 10, 2.5, [{10: 1.0}, {10: 2.0}, {10: 3.0}])
    assert stop == EarlyStop(step=10, metric="loss", value=2.5, median=2.0, finished_trials=3)


def test_equal_to_the_median_is_not_stopped() -> None:
    assert decide(LOSS, 10, 2.0, [{10: 1.0}, {10: 2.0}, {10: 3.0}]) is None
    assert decide(ACC, 10, 0.5, [{10: 0.5}]) is None


def test_better_than_the_median_is_not_stopped() -> None:
    assert decide(LOSS, 10, 1.5, [{10: 1.0}, {10: 2.0}, {10: 3.0}]) is None


def test_max_mode_stops_the_lower_value_and_min_mode_the_higher() -> None:
    finished = [{5: 0.8}]
    assert decide(ACC, 5, 0.7, finished) is not None
    assert decide(ACC, 5, 0.9, finished) is None
    assert decide(Rule("accuracy", "min"), 5, 0.9, finished) is not None
    assert decide(Rule("accuracy", "min"), 5, 0.7, finished) is None


def test_even_count_compares_with_the_mean_of_the_middle_two() -> None:
    finished = [{1: 1.0}, {1: 2.0}, {1: 4.0}, {1: 9.0}]  # median 3.0
    assert decide(LOSS, 1, 3.0, finished) is None
    stop = decide(LOSS, 1, 3.01, finished)
    assert stop is not None and stop.median == 3.0 and stop.finished_trials == 4


def test_no_finished_trial_stops_nothing() -> None:
    assert decide(LOSS, 10, 1e9, []) is None


def test_one_finished_trial_is_enough_by_default_and_not_with_min_finished_2() -> None:
    assert decide(LOSS, 3, 5.0, [{3: 1.0}]) is not None
    two = Rule("loss", "min", min_finished=2)
    assert decide(two, 3, 5.0, [{3: 1.0}]) is None
    assert decide(two, 3, 5.0, [{3: 1.0}, {3: 2.0}]) is not None


def test_trials_with_no_point_at_or_before_the_step_are_left_out_and_counted_out() -> None:
    finished = [{0: 1.0}, {50: 0.1}, {100: 0.0}]
    stop = decide(LOSS, 20, 1.5, finished)  # only the first has a point <= 20
    assert stop is not None and stop.median == 1.0 and stop.finished_trials == 1
    assert decide(Rule("loss", "min", min_finished=2), 20, 1.5, finished) is None  # one is too few
    assert decide(LOSS, 20, 1.5, [{50: 0.1}]) is None  # none has a point yet


def test_grace_steps_edge() -> None:
    graced = Rule("loss", "min", grace_steps=10)
    finished = [{0: 0.0}]
    assert decide(graced, 9, 5.0, finished) is None  # before the grace step
    assert decide(graced, 10, 5.0, finished) is not None  # at it: judged


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_value_that_is_not_finite_is_never_stopped(value: float) -> None:
    assert decide(LOSS, 1, value, [{1: 0.0}]) is None


def test_curve_of_keeps_finite_numbers_of_the_metric_at_their_steps() -> None:
    points = [
        Progress(step=1, metrics={"loss": 2.0}),
        Progress(step=2, metrics={"loss": None}),  # a NaN reported becomes None in a Progress
        Progress(step=3, metrics={"accuracy": 0.5}),  # another metric only
        Progress(step=None, metrics={"loss": 1.0}),  # no step
        Progress(step=4, metrics={"loss": True}),  # a bool is no metric value
        Progress(step=5, metrics={"loss": 1.5}),
        Progress(step=5, metrics={"loss": 1.25}),  # the last report at a step wins
    ]
    assert curve_of(points, "loss") == {1: 2.0, 5: 1.25}


def test_curve_of_is_bounded_and_keeps_the_newest_point() -> None:
    points = [Progress(step=s, metrics={"loss": float(s)}) for s in range(MAX_CURVE_POINTS * 3)]
    curve = curve_of(points, "loss")
    assert len(curve) <= MAX_CURVE_POINTS
    assert max(curve) == MAX_CURVE_POINTS * 3 - 1 and min(curve) == 0


def test_a_curve_document_reads_back() -> None:
    raw = curve_document("application_1_0001", LOSS, {0: 1.0, 10: 0.5})
    assert parse_curve(raw, LOSS) == {0: 1.0, 10: 0.5}
    assert json.loads(raw)["application_id"] == "application_1_0001"


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"version": 2, "metric": "loss", "mode": "min", "points": [[1, 1.0]]}',  # another version
        b'{"version": 1, "metric": "accuracy", "mode": "min", "points": [[1, 1.0]]}',  # another metric
        b'{"version": 1, "metric": "loss", "mode": "max", "points": [[1, 1.0]]}',  # another mode
        b'{"version": 1, "metric": "loss", "mode": "min", "points": {"1": 1.0}}',  # points not a list
        b'{"version": 1, "metric": "loss", "mode": "min", "points": []}',  # no point
        b'{"version": 1, "metric": "loss", "mode": "min", "points": [[-1, 1.0], [true, 1.0], [1, "x"], [2]]}',
        b'{"version": 1, "metric": "loss", "mode": "min", "points": [[1, NaN], [2, Infinity]]}',
        b"[" * 100_000,  # too deep for the JSON parser
    ],
)
def test_a_file_that_is_not_one_of_the_rules_curves_is_ignored(raw: bytes) -> None:
    assert parse_curve(raw, LOSS) is None


def test_bad_points_are_dropped_and_good_ones_kept() -> None:
    raw = b'{"version": 1, "metric": "loss", "mode": "min", "points": [[1, "x"], [2, 0.5], [3.5, 1.0], [4, 7]]}'
    assert parse_curve(raw, LOSS) == {2: 0.5, 4: 7.0}


def test_a_value_beyond_any_float_is_dropped_and_the_file_still_read() -> None:
    """The folder is anyone's: an integer JSON holds whole but no float can (float() overflows) is no
    figure, dropped like NaN, not an error that would end the look at the folder."""
    raw = b'{"version": 1, "metric": "loss", "mode": "min", "points": [[1, 1%s], [2, 0.5]]}' % (b"0" * 400)
    assert parse_curve(raw, LOSS) == {2: 0.5}


def test_a_file_over_the_byte_cap_is_ignored_whole() -> None:
    points = [[i, 0.0] for i in range(MAX_CURVE_BYTES // 6)]
    raw = json.dumps({"version": 1, "metric": "loss", "mode": "min", "points": points}).encode()
    assert len(raw) > MAX_CURVE_BYTES
    assert parse_curve(raw, LOSS) is None


def test_only_the_first_points_of_a_long_file_are_read() -> None:
    points = [[i, 0.0] for i in range(MAX_CURVE_POINTS + 50)]
    raw = json.dumps({"version": 1, "metric": "loss", "mode": "min", "points": points}).encode()
    curve = parse_curve(raw, LOSS)
    assert curve is not None and len(curve) == MAX_CURVE_POINTS


def test_a_curve_of_exactly_the_cap_is_kept_whole() -> None:
    points = [Progress(step=s, metrics={"loss": float(s)}) for s in range(MAX_CURVE_POINTS)]
    assert curve_of(points, "loss") == {s: float(s) for s in range(MAX_CURVE_POINTS)}


@pytest.mark.parametrize("count", [MAX_CURVE_POINTS + 1, MAX_CURVE_POINTS + 2])
def test_a_curve_over_the_cap_drops_every_other_older_point_and_keeps_the_newest(count: int) -> None:
    """One pass: the older points from the oldest on, every other one, then the newest (for an odd and an
    even number of older points)."""
    points = [Progress(step=s, metrics={"loss": float(s)}) for s in range(count)]
    newest = count - 1
    assert sorted(curve_of(points, "loss")) == [*range(0, newest, 2), newest]


def test_a_file_of_exactly_the_byte_cap_is_read() -> None:
    body = b'{"version": 1, "metric": "loss", "mode": "min", "points": [[1, 0.5]]}'
    raw = body + b" " * (MAX_CURVE_BYTES - len(body))  # JSON allows trailing whitespace
    assert len(raw) == MAX_CURVE_BYTES
    assert parse_curve(raw, LOSS) == {1: 0.5}


def test_a_point_of_the_wrong_shape_is_dropped_and_the_points_after_it_still_read() -> None:
    raw = b'{"version": 1, "metric": "loss", "mode": "min", "points": [[1], {"2": 0.5}, [3, 0.25, 9], [4, 0.125]]}'
    assert parse_curve(raw, LOSS) == {4: 0.125}
