"""``sweep.rank``: which trial of a sweep is published, which stay candidates, which are out and why."""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_provider_tony.sweep_ranking import rank


def trial(app: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {
        "application_id": app,
        "name": f"trial-{app}",
        "final_state": "SUCCEEDED",
        "metrics": {"val_accuracy": value},
        "model_dir": f"/m.candidate-{app}",
        "candidate": True,
        **extra,
    }


def test_the_best_by_mode_wins_and_the_rest_stay_candidates_best_first() -> None:
    results = [trial("a", 0.8), trial("b", 0.9), trial("c", 0.85)]
    best = rank(results, "val_accuracy", "max")
    assert best.best is not None and best.best.application_id == "b"
    assert [t.application_id for t in best.candidates] == ["c", "a"] and best.out == ()
    low = rank(results, "val_accuracy", "min")
    assert low.best is not None and low.best.application_id == "a"
    assert [t.application_id for t in low.candidates] == ["c", "b"]


def test_a_tie_goes_to_the_earlier_trial() -> None:
    ranked = rank([trial("a", 0.9), trial("b", 0.9)], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.application_id == "a" and ranked.best.index == 0


@pytest.mark.parametrize(
    "result, why",
    [
        (trial("s", 0.99, early_stopped={"step": 10, "value": 2.0, "median": 1.0}), "stopped early at step 10"),
        (trial("f", 0.99, final_state="FAILED"), "did not succeed (FAILED)"),
        (trial("p", 0.99, candidate=False), "no candidate"),
        (trial("t", "0.99"), "no numeric 'val_accuracy'"),
        (trial("n", math.nan), "no numeric 'val_accuracy'"),
        (trial("i", math.inf), "no numeric 'val_accuracy'"),
        (trial("b", True), "no numeric 'val_accuracy'"),
        (None, "no result"),
        ("text", "no result"),
    ],
)
def test_a_trial_that_cannot_be_published_is_out_with_its_reason_even_when_its_figure_is_best(
    result: Any, why: str
) -> None:
    ranked = rank([trial("ok", 0.5), result], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.application_id == "ok" and ranked.candidates == ()
    (out,) = ranked.out
    assert why in out.out and out.index == 1
    assert ranked.stopped == ((out,) if why.startswith("stopped") else ())


def test_no_trial_that_can_be_published_leaves_no_best() -> None:
    ranked = rank([trial("f", 0.9, final_state="FAILED")], "val_accuracy", "max")
    assert ranked.best is None and ranked.candidates == () and len(ranked.out) == 1
    assert rank([], "val_accuracy", "max").best is None


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="'max' or 'min'"):
        rank([trial("a", 0.9)], "val_accuracy", "best")


def test_a_trial_s_dict_names_it_and_omits_an_empty_reason() -> None:
    ranked = rank([{**trial("a", 0.9), "name": None}, trial("f", 0.1, final_state="KILLED")], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.to_dict() == {
        "index": 0,
        "name": "trial 0",
        "application_id": "a",
        "value": 0.9,
        "model_dir": "/m.candidate-a",
    }
    assert ranked.out[0].to_dict()["out"] == "did not succeed (KILLED)"


def test_a_held_model_s_figure_comes_from_its_verdict_when_the_metrics_lack_it() -> None:
    held = {**trial("h", None), "quality_gate": {"metric": "val_accuracy", "value": 0.7, "awaiting_approval": True}}
    ranked = rank([held], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.value == 0.7
    other = {**trial("o", None), "quality_gate": {"metric": "loss", "value": 0.7}}
    assert rank([other], "val_accuracy", "max").best is None, "another metric's figure is no figure"


def test_a_trial_with_no_result_is_named_by_its_position_and_has_no_application_or_model() -> None:
    ranked = rank([trial("ok", 0.5), None], "val_accuracy", "max")
    assert ranked.out[0].to_dict() == {
        "index": 1,
        "name": "trial 1",
        "application_id": "",
        "value": None,
        "model_dir": "",
        "out": "no result (the task did not return one)",
    }


def test_a_trial_is_named_and_placed_as_its_result_says() -> None:
    ranked = rank([trial("a", 0.9)], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.to_dict() == {
        "index": 0,
        "name": "trial-a",
        "application_id": "a",
        "value": 0.9,
        "model_dir": "/m.candidate-a",
    }
    assert ranked.best.out == ""


def test_a_result_without_an_application_or_model_dir_has_empty_ones() -> None:
    bare = {k: v for k, v in trial("a", 0.9).items() if k not in ("application_id", "model_dir")}
    best = rank([bare], "val_accuracy", "max").best
    assert best is not None and best.application_id == "" and best.model_dir == ""


@pytest.mark.parametrize("metrics", [None, ["val_accuracy", 0.9], "val_accuracy=0.9"])
def test_a_result_whose_metrics_are_not_a_mapping_has_no_figure(metrics: Any) -> None:
    ranked = rank([{**trial("a", 0.9), "metrics": metrics}], "val_accuracy", "max")
    assert ranked.best is None and ranked.out[0].out == "reported no numeric 'val_accuracy'"


def test_a_trial_that_is_no_candidate_says_how_to_make_it_one() -> None:
    (out,) = rank([trial("p", 0.9, candidate=False)], "val_accuracy", "max").out
    assert out.out == "its model is no candidate (run the trials with publish=False and a quality_gate)"


def test_a_figure_of_zero_ranks_as_zero() -> None:
    ranked = rank([trial("a", 0.5), trial("z", 0.0)], "val_accuracy", "min")
    assert ranked.best is not None and ranked.best.application_id == "z"
    ranked = rank([trial("a", -0.5), trial("z", 0.0)], "val_accuracy", "max")
    assert ranked.best is not None and ranked.best.application_id == "z"


@pytest.mark.parametrize(("mode", "first", "second"), [("max", 1.0e308, 1.5e308), ("min", 1.5e308, 1.0e308)])
def test_figures_at_the_edge_of_the_float_range_still_rank_by_value(mode: str, first: float, second: float) -> None:
    """Any finite figure is a figure: ranking must not overflow two large ones into a tie (which the
    earlier trial would win)."""
    ranked = rank([trial("a", first), trial("b", second)], "val_accuracy", mode)
    assert ranked.best is not None and ranked.best.application_id == "b"
