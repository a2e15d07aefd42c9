"""Power of the verdict's own rule (Holm-adjusted Wilcoxon and a bootstrap CI), simulated."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wilcoxon

from metrics.stats import (
    SIMULATIONS,
    TASKS_CAP,
    _oriented,
    _signed_rank,
    _Simulation,
    min_detectable_difference,
    rule_power,
    tasks_needed,
)

RNG = np.random.default_rng(11)
CONTINUOUS = RNG.normal(0.02, 0.08, 40)  # ROUGE-like differences
JUDGE = RNG.choice([-2, -1, 0, 0, 0, 1, 1, 2], 60).astype(float)  # 1-5 scores: many ties
SE = np.sqrt(0.8 * 0.2 / SIMULATIONS)  # simulation error of a power near 0.8


@pytest.mark.parametrize("observed,n,delta", [
    (CONTINUOUS[:6], 6, 0.0), (CONTINUOUS[:6], 6, 0.1), (JUDGE[:10], 9, 0.5),
    (CONTINUOUS[:20], 20, 0.03), (JUDGE[:30], 30, 0.4), (CONTINUOUS, 50, 0.0),
    (JUDGE, 90, 0.3), (CONTINUOUS, 120, 0.02)])
def test_each_simulated_p_value_is_scipys_wilcoxon(observed, n, delta):
    # scipy chooses exact, sign-flip permutation or normal by n, ties and zeros: so must we
    base, untied, _ = _oriented(observed)
    sim = _Simulation(base, untied, n, seed=3)
    values = base + delta * sim.spread * untied
    w, k, ranks = _signed_rank(sim.counts, values)
    p = sim._p_values(w, k, ranks, values)
    for s in range(15):
        row = values[sim.idx[s]] if n <= 50 else np.repeat(values, sim.counts[s].astype(int))
        if np.count_nonzero(row):
            assert p[s] == pytest.approx(wilcoxon(row).pvalue, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("comparisons", [1, 3])
def test_power_at_the_reported_mdd_is_80_percent_within_simulation_error(comparisons):
    mdd = min_detectable_difference(CONTINUOUS, comparisons)
    assert mdd.value is not None and mdd.value > 0
    fresh = rule_power(CONTINUOUS, mdd.value, comparisons, seed=99)  # not the search's draws
    assert fresh == pytest.approx(0.8, abs=4 * SE)
    assert rule_power(CONTINUOUS, mdd.value, comparisons) >= 0.8
    assert rule_power(CONTINUOUS, 0.99 * mdd.value, comparisons) < 0.8


def test_with_tied_judge_scores_the_mdd_is_where_power_first_reaches_80_percent():
    # shifted 1-5 score differences cross 0 together, so power jumps there: at the MDD it
    # is at least 80% (within simulation error), just below it less
    mdd = min_detectable_difference(JUDGE, 3)
    assert mdd.value is not None and mdd.value > 0
    assert rule_power(JUDGE, mdd.value, 3, seed=99) >= 0.8 - 4 * SE
    assert rule_power(JUDGE, 0.99 * mdd.value, 3, seed=99) < 0.8 + 4 * SE
    assert rule_power(JUDGE, 0.99 * mdd.value, 3) < 0.8


def test_power_is_monotone_in_delta_and_near_zero_without_a_difference():
    grid = np.linspace(0, 0.12, 13)
    powers = [rule_power(CONTINUOUS, d) for d in grid]
    assert powers == sorted(powers)
    assert powers[0] < 0.05 and powers[-1] > 0.95
    judged = [rule_power(JUDGE, d, comparisons=3) for d in np.linspace(0, 1.5, 11)]
    assert judged == sorted(judged)


def test_at_six_tasks_the_rule_needs_more_than_the_t_test_says():
    # an outside check found the rule's power at the t-test's "80%" difference was 0.41-0.62
    from statsmodels.stats.power import TTestPower

    six = np.array([0.05, 0.12, -0.03, 0.08, 0.02, 0.10])
    effect = TTestPower().solve_power(effect_size=None, nobs=6, alpha=0.05, power=0.8,
                                      alternative="two-sided")
    t_mdd = effect * six.std(ddof=1)
    mdd = min_detectable_difference(six)
    assert mdd.value is not None and mdd.value > t_mdd
    assert rule_power(six, t_mdd) < 0.7


def test_a_larger_family_needs_a_larger_difference():
    one, three = (min_detectable_difference(CONTINUOUS, m).value for m in (1, 3))
    assert one is not None and three is not None and three > one


def test_no_power_without_differences_or_spread_or_enough_untied_tasks():
    zero = min_detectable_difference([0.0] * 12)
    assert zero.value is None and not zero.defined and "every paired difference is 0" in zero.why
    assert rule_power([0.0] * 12, 0.1) is None
    assert tasks_needed([0.0] * 12).value is None
    flat = min_detectable_difference([0.5] * 12)
    assert flat.value is None and "no spread" in flat.why
    # 6 tasks in a family of 3: the smallest Wilcoxon p over 6 pairs (1/32) is never < 0.05/3
    few = min_detectable_difference(CONTINUOUS[:6], comparisons=3)
    assert few.value is None and few.defined and "3 comparisons" in few.why
    four = min_detectable_difference(CONTINUOUS[:4])
    assert four.value is None and "never tests" in four.why
    assert tasks_needed(CONTINUOUS[:4]).value is not None  # more tasks would, though


def test_tasks_needed_is_the_smallest_n_reaching_80_percent():
    small = np.concatenate([CONTINUOUS[:20] - CONTINUOUS[:20].mean() + 0.01])
    needed = tasks_needed(small)
    assert needed.value is not None and needed.value > 20
    n = int(needed.value)
    assert rule_power(small, 0.01, n=n) >= 0.8 > rule_power(small, 0.01, n=n - 2 - n // 100)
    tiny = CONTINUOUS - CONTINUOUS.mean() + 1e-5
    beyond = tasks_needed(tiny)
    assert beyond.value is None and beyond.why == f"more than {TASKS_CAP:,} tasks"


def _key_finding(arag: list[float], naive: list[float], stuffing: list[float]) -> str:
    """The key finding of a report over three runs' scores on the same 12 tasks."""
    from report.report import build_report
    from tests.test_report import rec, row, section

    records = {name: [rec(f"t{k}", s) for k, s in enumerate(scores)]
               for name, scores in (("arag", arag), ("naive", naive), ("stuffing", stuffing))}
    text, _ = build_report([row("arag"), row("naive"), row("stuffing")], records, "t")
    assert "t-test" not in text
    return section(text, "Key finding")


def test_the_key_finding_states_the_rules_power_for_each_comparison_it_makes():
    # untied, distinct differences: scipy's Wilcoxon is exact, not a slow permutation test
    rng = np.random.default_rng(5)
    arag = list(np.round(3.5 + rng.normal(0, 0.5, 12), 4))
    naive = list(np.round(np.array(arag) - 0.4 + rng.normal(0, 0.4, 12), 4))
    stuffing = list(np.round(np.array(arag) - 0.1 + rng.normal(0, 0.4, 12), 4))
    finding = _key_finding(arag, naive, stuffing)
    lines = [line for line in finding.splitlines() if line.startswith("- **arag** vs")]
    assert len(lines) == 2  # the agent against each baseline, each with its own power
    for line, other in zip(lines, (naive, stuffing), strict=True):
        assert ("the rule that decides (Holm-adjusted Wilcoxon with a bootstrap CI, simulated "
                "from the observed differences, 1,000 resamples; Holm at its worst case, "
                "p < 0.05/3)") in line  # three pairs of contenders are tested together
        mdd = min_detectable_difference(np.subtract(arag, other), comparisons=3)
        if mdd.value is not None:
            assert f"**minimum detectable difference** over these 12 tasks is {mdd.value:.3f}" \
                in line
        else:
            assert f"cannot be computed: {mdd.why}" in line


def test_best_against_runner_up_states_its_power_when_no_pair_line_did():
    rng = np.random.default_rng(6)
    naive = list(np.round(3.5 + rng.normal(0, 0.5, 12), 4))
    stuffing = list(np.round(np.array(naive) - 0.1 + rng.normal(0, 0.3, 12), 4))
    arag = list(np.round(np.array(naive) - 0.8 + rng.normal(0, 0.3, 12), 4))
    finding = _key_finding(arag, naive, stuffing)
    best = next(line for line in finding.splitlines() if line.startswith("- Best"))
    assert "naive" in best and "stuffing" in best  # the two baselines lead the agent
    assert "**minimum detectable difference**" in best and "p < 0.05/3" in best
    assert finding.count("**minimum detectable difference**") == 3
