"""The anytime-valid comparisons a sequential sweep stops on (metrics/sequential.py)."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.base import Metric
from metrics.sequential import (
    Comparison,
    State,
    Stop,
    betting_cs,
    compare,
    difference_cs,
    first_settled,
    margin_for,
    paired,
    stop_reason,
)
from tests.conftest import SHARED


def test_the_sequence_covers_the_true_mean_at_every_time_in_at_least_95_percent_of_runs():
    rng = np.random.default_rng(7)
    runs, n, mean = 200, 60, 0.3
    misses = 0
    for _ in range(runs):
        lows, highs = betting_cs(rng.binomial(1, mean, size=n).astype(float))
        misses += bool(np.any((lows > mean) | (highs < mean)))
    assert misses / runs <= 0.05


def test_the_sequence_narrows_and_matches_the_published_construction():
    # values of confseq.betting.hedged_cs (breaks=1000, running intersection) on this data
    x = np.linspace(0.1, 0.6, 200) % 0.5
    lows, highs = betting_cs(x)
    assert np.all(np.diff(lows) >= 0) and np.all(np.diff(highs) <= 0)
    assert lows[[19, 99, 199]] == pytest.approx([0.06, 0.189, 0.245])
    assert highs[[19, 99, 199]] == pytest.approx([0.377, 0.267, 0.267])


def test_a_value_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        betting_cs([0.5, 1.5])


def planted(first: np.ndarray, second: np.ndarray, margin: float) -> Comparison:
    return Comparison("rouge2_f1", "a", "b", tuple(first - second), width=1.0, margin=margin)


def looks_until_stop(first: np.ndarray, second: np.ndarray, batch: int = 20, margin: float = 0.02):
    """Look after every batch, as the sweep does; the looks and the reason it stopped."""
    for done in range(batch, len(first) + batch, batch):
        done = min(done, len(first))
        looks = compare([planted(first[:done], second[:done], margin)])
        reason = stop_reason(looks, done, len(first))
        if reason is not None:
            return done, looks, reason
    raise AssertionError("the sweep never stopped")


def test_a_planted_large_difference_stops_early_and_names_the_winner():
    rng = np.random.default_rng(0)
    copy_of_reference = rng.uniform(0.7, 1.0, size=495)
    filler = rng.uniform(0.0, 0.1, size=495)
    done, looks, reason = looks_until_stop(filler, copy_of_reference)
    assert reason == Stop.decided and done <= 40
    assert looks[0].state == State.decided and looks[0].higher == "b"
    assert looks[0].high < 0


def test_a_fair_coin_per_task_declares_nothing():
    rng = np.random.default_rng(11)
    a, b = rng.binomial(1, 0.5, size=(2, 495)).astype(float)
    done, looks, reason = looks_until_stop(a, b, batch=99)
    assert reason == Stop.tasks_out and done == 495
    assert looks[0].state != State.decided and looks[0].higher is None
    assert looks[0].low < 0 < looks[0].high


@pytest.mark.parametrize("seed", range(20))
def test_a_fair_coin_per_task_is_never_decided_at_any_batch(seed):
    a, b = np.random.default_rng(seed).binomial(1, 0.5, size=(2, 495)).astype(float)
    assert first_settled(a - b, width=1.0, margin=0.02, batch=20) == (495, State.open)


def test_identical_systems_are_found_equivalent_within_the_margin():
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=400)
    noise = rng.normal(0, 0.01, size=400)
    done, looks, reason = looks_until_stop(scores, np.clip(scores + noise, 0, 1), margin=0.05)
    assert reason == Stop.equivalent and done < 400
    assert -0.05 <= looks[0].low and looks[0].high <= 0.05


def test_the_family_splits_alpha_and_each_interval_widens_with_it():
    diffs = tuple(np.random.default_rng(1).normal(0.05, 0.2, size=120).clip(-1, 1))
    alone = compare([Comparison("m", "a", "b", diffs, 1.0, 0.02)])[0]
    family = compare([Comparison(f"m{i}", "a", "b", diffs, 1.0, 0.02) for i in range(4)])
    assert family[0].alpha == pytest.approx(0.0125)
    assert family[0].high - family[0].low > alone.high - alone.low


def test_a_score_outside_its_declared_range_is_refused_not_clipped():
    with pytest.raises(ValueError, match="outside the bounds"):
        difference_cs([0.5, 1.2], width=1.0)


def test_differences_are_in_the_metrics_units():
    lows, highs = difference_cs([3.0] * 60, width=4.0)  # a 1-5 judge score, +3 every task
    assert 2.0 < lows[-1] <= 3.0 <= highs[-1] <= 4.0


def test_a_comparison_with_no_task_yet_is_open_over_the_whole_range():
    look = compare([Comparison("m", "a", "b", (), 1.0, 0.02)])[0]
    assert look.state == State.open and look.mean_diff is None and (look.low, look.high) == (-1, 1)


def test_the_stop_says_why():
    open_look = compare([Comparison("m", "a", "b", (0.1, -0.1), 1.0, 0.02)])
    assert stop_reason(open_look, 40, 495) is None
    assert stop_reason(open_look, 40, 495, cost_capped=True) == Stop.cost_cap
    assert stop_reason(open_look, 100, 495, max_tasks=100) == Stop.max_tasks
    assert stop_reason(open_look, 495, 495) == Stop.tasks_out


ROUGE2 = Metric("rouge2_f1", bounds=(0.0, 1.0))
ECTSUM_VAL = SHARED / "ectsum" / "data" / "final" / "val"


def records(scores: dict[str, list[float]]) -> list[dict[str, object]]:
    return [{"id": task, "repeat": i, "rouge2_f1": s}
            for task, values in scores.items() for i, s in enumerate(values)]


def test_a_pair_is_each_tasks_mean_over_its_repeats_in_the_order_the_tasks_ran():
    first = records({"t1": [0.5, 0.7], "t2": [0.2, 0.2], "t3": [0.9, 0.9]})
    second = records({"t2": [0.1, 0.3], "t1": [0.4, 0.4]})  # t3 not scored by the second
    pair = paired(ROUGE2, ("a", first), ("b", second), order=["t2", "t3", "t1"])
    assert pair.differences == pytest.approx((0.0, 0.2))
    assert (pair.width, pair.margin) == (1.0, pytest.approx(0.02))


def test_margins_are_the_given_one_or_a_share_of_the_metrics_range():
    assert margin_for(Metric("geval_coverage", bounds=(1.0, 5.0))) == pytest.approx(0.08)
    assert margin_for(ROUGE2, 0.01) == 0.01
    with pytest.raises(ValueError, match="word_count declares no bounds"):
        margin_for(Metric("word_count"))


@pytest.mark.skipif(not ECTSUM_VAL.is_dir(), reason=f"../shared/datasets not present: {ECTSUM_VAL}")
def test_a_copy_of_the_reference_beats_filler_at_the_first_look():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    references = {p.stem: p.read_text() for p in sorted((ECTSUM_VAL / "gt_summaries").glob("*.txt"))[:20]}
    filler = "The call covered several topics and management thanked everyone for joining."

    def scored(answer) -> list[dict[str, object]]:
        return records({t: [scorer.score(ref, answer(ref))["rouge2"].fmeasure]
                        for t, ref in references.items()})

    order = list(references)
    copy, fill = scored(lambda ref: ref), scored(lambda ref: filler)
    looks = compare([paired(ROUGE2, ("copy", copy[:20]), ("filler", fill[:20]), order)])
    assert stop_reason(looks, 20, 249) == Stop.decided
    assert looks[0].higher == "copy" and looks[0].low > 0.4
