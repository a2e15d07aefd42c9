"""Tasks that share a document are resampled and tested together: FinanceBench's 150
questions on 84 filings are not 150 independent tasks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import wilcoxon

from metrics.stats import document_clusters, paired_difference
from report.report import build_report
from tests.conftest import SHARED
from tests.test_report import rec, row, section

FB_QUESTIONS = SHARED / "financebench" / "data" / "financebench_open_source.jsonl"


def test_clusters_join_tasks_through_any_shared_document():
    assert document_clusters([["a"], ["b"], ["a"], ["b", "c"], ["c"], ["d"]]) == [0, 1, 0, 1, 1, 2]


def test_with_a_document_per_task_nothing_changes():
    rng = np.random.default_rng(3)
    a, b = rng.random(40), rng.random(40)
    plain = paired_difference(a, b)
    own = paired_difference(a, b, clusters=[f"d{i}" for i in range(40)])
    assert plain == own and own is not None and own.n_clusters is None


def test_shared_documents_are_tested_on_their_mean_differences_by_hand():
    diff = np.array([0.5, 0.3, 0.2, -0.1, 0.4, 0.6, 0.1, 0.2, 0.3, 0.05, -0.2, 0.7])
    clusters = ["A", "A", "B", "B", "C", "C", "D", "D", "E", "E", "F", "F"]
    res = paired_difference(diff, np.zeros(12), clusters=clusters)
    assert res is not None and res.n == 12 and res.n_clusters == 6
    means = diff.reshape(6, 2).mean(axis=1)
    assert res.p == pytest.approx(wilcoxon(means).pvalue)
    assert res.mean_diff == pytest.approx(diff.mean())
    # the CI by hand: clusters drawn with replacement, the mean over their tasks
    rng = np.random.default_rng(0)
    drawn = rng.integers(0, 6, size=(2000, 6))
    boots = diff.reshape(6, 2).sum(axis=1)[drawn].sum(axis=1) / 12
    assert (res.ci_low, res.ci_high) == pytest.approx(tuple(np.percentile(boots, [2.5, 97.5])))


@pytest.mark.skipif(not FB_QUESTIONS.exists(), reason=f"../shared/datasets not present: "
                    f"{FB_QUESTIONS} (clone github.com/patronus-ai/financebench)")
def test_a_filing_level_effect_widens_the_ci_and_the_verdict_counts_documents():
    """Every question of a filing right or wrong together (a planted document-level effect):
    the CI resamples filings, so it is wider than a per-task bootstrap's, and the verdict
    says how many documents the tasks are on."""
    questions = [json.loads(line) for line in FB_QUESTIONS.read_text().splitlines() if line]
    docs = [q["doc_name"] for q in questions]
    rng = np.random.default_rng(7)
    right = {d: {"arag": rng.random() < 0.65, "naive": rng.random() < 0.35} for d in sorted(set(docs))}
    records = {system: [rec(q["financebench_id"], None, doc_ids=[q["doc_name"]],
                            rouge2_f1=float(right[q["doc_name"]][system])) for q in questions]
               for system in ("arag", "naive")}
    text, data = build_report([row("arag"), row("naive")], records, "t", ["rouge2_f1"])
    decision = data["decided"][0]
    clustered = decision.paired
    per_task = paired_difference(*(np.array([r["rouge2_f1"] for r in records[s]])
                                   for s in ("arag", "naive")))
    assert clustered is not None and per_task is not None
    assert clustered.n == len(questions) and clustered.n_clusters == len(set(docs))
    assert clustered.ci_high - clustered.ci_low > 1.2 * (per_task.ci_high - per_task.ci_low)
    finding = section(text, "Key finding")
    assert f"n={len(questions)} tasks on {len(set(docs))} documents" in finding
    assert f"over these {len(set(docs))} documents" in finding  # the power is of documents
