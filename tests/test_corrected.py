"""The judge corrected by people's labels (PPI++): a judge that scores one point high is
corrected back towards the truth, with the estimate and CI of the documented estimator, and
the report decides on corrected figures only with enough labels on every run."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.ppi import ppi_mean
from report.report import build_report
from tests.test_report import rec, row
from tracking.human_labels import HumanLabel

TRUTH = [3, 4, 2, 5, 3, 4, 1, 3, 4, 2, 5, 3, 2, 4, 3, 1, 4, 5, 2, 3]
DIM = "geval_faithfulness"


def test_a_judge_one_point_high_is_corrected_to_within_the_truths_ci_as_ppi_python():
    truth = np.array(TRUTH, dtype=float)
    judge = truth + 1  # one point high on all 20 tasks
    estimate = ppi_mean(truth[:10], judge[:10], judge[10:])  # people label 10 of them
    assert estimate is not None
    half = 1.96 * truth.std(ddof=1) / np.sqrt(len(truth))
    assert abs(estimate.mean - truth.mean()) < half < abs(judge.mean() - truth.mean())
    # ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=0.05) and ppi_mean_pointestimate,
    # ppi-python 0.2.3, on these numbers
    assert (estimate.mean, estimate.ci_low, estimate.ci_high) == pytest.approx(
        (3.14292469, 2.62153605, 3.66431334))
    # the documented formula, written out
    y, yhat, yhat_u = truth[:10], judge[:10], judge[10:]
    lam = np.clip(np.mean((y - y.mean()) * (yhat - yhat.mean()))
                  / (2 * np.var(np.concatenate([yhat, yhat_u]), ddof=1)), 0, 1)
    mean = lam * yhat_u.mean() + np.mean(y - lam * yhat)
    se = np.sqrt(np.var(lam * yhat_u) / 10 + np.var(y - lam * yhat) / 10)
    assert (estimate.mean, estimate.ci_low) == pytest.approx((mean, mean - 1.959964 * se))


def test_without_enough_labels_there_is_no_estimate():
    assert ppi_mean([3.0], [4.0], [4.0, 5.0]) is None


def labels(run: str, tasks: list[int], scores: list[int]) -> list[HumanLabel]:
    return [HumanLabel(f"t{k}", run, DIM, scores[k], "ann", "file labels.jsonl") for k in tasks]


def report(labelled: dict[str, list[int]]) -> tuple[str, dict]:
    """arag's judge one point high, naive's exact; arag is truly 0.5 lower than naive."""
    arag_truth = [min(5, t) for t in TRUTH]
    naive_truth = [t + 0.5 for t in TRUTH]
    records = {"arag": [rec(f"t{k}", 3, **{DIM: arag_truth[k] + 1}) for k in range(20)],
               "naive": [rec(f"t{k}", 3, **{DIM: naive_truth[k]}) for k in range(20)]}
    people = [x for run, tasks in labelled.items() for x in labels(
        run, tasks, [round(v) for v in (arag_truth if run == "arag" else naive_truth)])]
    return build_report([row("arag"), row("naive")], records, "t", [DIM], labels=people)


def test_with_ten_labels_on_every_run_the_corrected_difference_decides():
    text, data = report({"arag": list(range(10)), "naive": list(range(10))})
    analysis = data["analysis"]
    corrected = analysis.run_metrics["arag"][f"{DIM}_ppi_mean"]
    raw = np.mean(TRUTH) + 1
    assert corrected < raw - 0.5  # the correction took most of the planted point off
    low, high = (analysis.run_metrics["arag"][f"{DIM}_ppi_ci_{k}"] for k in ("low", "high"))
    assert low <= corrected <= high
    assert f"arag_vs_naive_{DIM}_ppi_diff" in analysis.metrics
    (claim,) = [c for c in analysis.claims if c.kind == "corrected"]
    assert claim.decisive and claim.figures["decides"] and claim.key
    assert claim.figures["shared"] == 10 and claim.figures["min_shared"] == 10
    assert claim.difference == pytest.approx(-0.5, abs=0.01) and claim.ci[1] < 0
    assert "The judge corrected by your labels" in text and "moved by" in text
    # the planted point made arag look better; corrected, naive (truly 0.5 higher) is
    assert data["answer"].startswith("Corrected by your labels (PPI++): arag − naive = -0.50")
    assert "naive is higher" in data["answer"] and "raw scores: Decided: arag beats" in data[
        "answer"]


def test_too_few_labels_do_not_decide_and_a_run_without_labels_is_named():
    _, data = report({"arag": list(range(5))})
    analysis = data["analysis"]
    assert "naive" not in analysis.run_metrics  # no labels, no corrected figure
    notes = {(n.kind, n.runs): n.counts for n in analysis.notes}
    assert notes[("ppi_no_estimate", ("naive",))]["labelled"] == 0
    assert notes[("ppi_too_few_shared", ("arag", "naive"))]["shared"] == 0
    assert not [c for c in analysis.claims if c.kind == "corrected" and c.decisive]
    assert data["answer"].startswith("Decided: arag beats naive")  # the raw answer stands


def test_a_judge_of_the_judged_models_family_is_flagged_and_another_family_suggested():
    records = {s: [rec(f"t{k}", 3 + (k + (s == "arag")) % 2) for k in range(6)]
               for s in ("arag", "naive")}
    rows = [row("arag", judge="claude-haiku-4-5", model="claude-sonnet-4-6"),
            row("naive", judge="claude-haiku-4-5", model="gpt-4o-mini")]
    _, data = build_report(rows, records, "t", ["geval_coverage"])
    from report.writers.words import say

    flagged = [n for n in data["analysis"].notes if n.kind == "self_preference"]
    assert len(flagged) == 1 and flagged[0].runs == ("arag (claude-sonnet-4-6)",)
    assert flagged[0].counts["suggest"] == "gpt-4o-mini"
    assert "`judge.panel=[gpt-4o-mini]`" in say(flagged[0])
    other = [row(s, judge="gpt-4o-mini", model="claude-sonnet-4-6") for s in ("arag", "naive")]
    _, data = build_report(other, records, "t", ["geval_coverage"])
    assert not [n for n in data["analysis"].notes if n.kind == "self_preference"]


def test_the_ppi_sample_is_the_same_tasks_for_each_run_proportional_to_the_judges_scores():
    from labelling.sample import expected_widths, ppi_sample

    records = {"arag": [{"id": f"t{k}", "predicted": "x", DIM: 4 if k % 4 else 2}
                        for k in range(40)],
               "naive": [{"id": f"t{k}", "predicted": "x", DIM: 3} for k in range(40)]}
    picked = ppi_sample(records, DIM, 20)
    arag = [rec[DIM] for run, rec in picked if run == "arag"]
    assert len(arag) == 10 and sum(run == "naive" for run, _ in picked) == 10
    assert sorted(arag).count(2) in (2, 3)  # a quarter of arag's scores are 2
    tasks = {run: sorted(rec["id"] for r, rec in picked if r == run) for run in records}
    assert tasks["arag"] == tasks["naive"] and len(set(tasks["arag"])) == 10  # the same tasks
    widths = expected_widths(records, DIM, [10, 20])
    sd = np.std([4 if k % 4 else 2 for k in range(40)], ddof=1)
    assert widths == [f"  arag: n=10: {2 * 1.959964 * sd / np.sqrt(10):.2f}, "
                      f"n=20: {2 * 1.959964 * sd / np.sqrt(20):.2f}",
                      "  naive: no width to expect before labels: the judge gave one score "
                      "throughout"]
