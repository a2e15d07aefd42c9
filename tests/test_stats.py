"""The statistics behind a verdict, against published values and reference libraries."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wilcoxon

from metrics.stats import (
    agreement,
    holm,
    krippendorff_alpha,
    paired_difference,
)

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the worked example with
# missing data: 4 observers x 12 units.
RELIABILITY = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
])


@pytest.mark.parametrize("level,published", [
    ("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)])
def test_krippendorff_alpha_reproduces_the_published_worked_example(level, published):
    assert krippendorff_alpha(RELIABILITY, level) == pytest.approx(published, abs=5e-4)


def test_agreement_has_a_bootstrap_ci_around_alpha_and_none_when_undefined():
    found = agreement(RELIABILITY)
    assert found is not None and found.n_items == 11  # unit 12 has one rating
    assert found.ci_low < found.alpha < found.ci_high
    assert agreement(np.array([[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]])) is None
    assert agreement(np.array([[4.0, nan], [nan, 2.0]])) is None


def test_paired_difference_drops_ties_from_the_test_and_says_so():
    first = [5, 4, 4, 3, 5, 2, 4, 3, 5, 4]
    second = [4, 4, 3, 3, 3, 1, 2, 3, 4, 2]
    res = paired_difference(first, second)
    diff = np.subtract(first, second)
    assert (res.n, res.n_untied, res.ties) == (10, 7, 3)
    assert res.p == pytest.approx(wilcoxon(diff[diff != 0]).pvalue)
    assert res.significant and res.verdict() == "significant"
    few = paired_difference([5, 4, 4, 3, 5, 2], [4, 4, 3, 3, 3, 1])
    assert few.n_untied == 4 and few.p is None and few.verdict() == "too few to test"
    noisy = paired_difference([5, 1, 4, 2, 5, 1, 3, 2], [1, 5, 2, 4, 1, 5, 2, 3])
    assert noisy.ci_includes_zero and noisy.verdict() == "no significant difference"


@pytest.mark.parametrize("raw", [[0.01, 0.04, 0.03, 0.2], [0.5, 0.001, None, 0.02, 0.02], [0.9]])
def test_holm_matches_statsmodels(raw):
    from statsmodels.stats.multitest import multipletests

    tested = [p for p in raw if p is not None]
    expected = iter(multipletests(tested, method="holm")[1])
    adjusted = holm(raw)
    assert [a is None for a in adjusted] == [p is None for p in raw]
    for got, p in zip(adjusted, raw, strict=True):
        if p is not None:
            assert got == pytest.approx(next(expected))
            assert p <= got <= 1
