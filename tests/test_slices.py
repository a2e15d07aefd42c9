"""Where each system wins: slices by document feature, the interaction test, the crossover."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr, wilcoxon

from arag.systems.builtin import Stuffing
from report.report import build_report
from runners.validation import ConfigError, validate_config
from tests.conftest import ROOT, SHARED, compose_cfg
from tests.test_report import rec, row, section

SECTION = "Where each system wins"


def records_by(scores: dict[str, list[float]], tokens: list[int], **features) -> dict:
    """Records of each system: task k has ``tokens[k]`` document tokens and its own document."""
    return {system: [rec(f"t{k}", None, tokens[k], rouge2_f1=s, doc_ids=[f"d{k}"],
                         **{name: values[k] for name, values in features.items()})
                     for k, s in enumerate(values_)]
            for system, values_ in scores.items()}


def slice_notes(analysis) -> list:
    """The section's notes (other sections, "What to ship", add their own)."""
    return [n for n in analysis.notes if n.kind.startswith("slices")]


def report(records: dict, **options):
    rows = [row(name) for name in records]
    return build_report(rows, records, "t", ["rouge2_f1"], options=options)


def crossover_records(copies_long: str, copies_short: str, n: int = 60, seed: int = 1):
    """``copies_long`` copies the reference on the longer half of the transcripts (ROUGE-2
    of 1), ``copies_short`` on the shorter half; elsewhere each scores what a real summary
    might (0.1 to 0.4)."""
    rng = np.random.default_rng(seed)
    tokens = sorted(int(t) for t in rng.integers(2_000, 20_000, size=n))
    long = [k >= n // 2 for k in range(n)]
    scores = {copies_long: [1.0 if lg else float(rng.uniform(0.1, 0.4)) for lg in long],
              copies_short: [float(rng.uniform(0.1, 0.4)) if lg else 1.0 for lg in long]}
    return scores, tokens


def test_a_planted_crossover_is_found_and_the_key_finding_says_where_each_wins(tmp_path):
    scores, tokens = crossover_records("arag", "stuffing")
    text, data = report(records_by(scores, tokens), slice_by=["document_tokens"])
    analysis = data["analysis"]
    [inter] = analysis.artifacts["interaction.jsonl"]
    assert inter["test"] == "spearman permutation" and inter["p_adjusted"] < 0.05
    [key] = [c for c in analysis.claims if c.kind == "interaction" and c.key]
    assert key.decisive and (key.figures["above"], key.figures["below"]) == ("arag", "stuffing")
    edge = min(t for t in tokens[len(tokens) // 2:])
    # the lead changes hands at a bin edge between the two halves
    assert tokens[len(tokens) // 2 - 1] <= key.figures["edge"] <= edge + 1
    # no average winner: the answer is the crossover, and names who leads where
    [answer] = data["answers"]
    assert answer.mode == "crossover" and answer.claims == [key]
    assert data["answer"].startswith("No average winner: arag ahead above ~")
    assert "stuffing below on rouge2_f1 (interaction p" in data["answer"]
    assert "![crossover_arag_vs_stuffing](plots/crossover_arag_vs_stuffing.png)" in text
    draw = analysis.plots[0]  # the crossover's (the frontier's comes after it)
    drawn = draw(tmp_path)
    assert drawn is not None and drawn.name == "crossover_arag_vs_stuffing.png"
    assert drawn.read_bytes().startswith(b"\x89PNG")
    assert SECTION in text


def test_a_fair_coin_per_task_claims_no_interaction():
    rng = np.random.default_rng(11)
    n = 60
    tokens = sorted(int(t) for t in rng.integers(2_000, 20_000, size=n))
    coin = rng.random(n) < 0.5
    scores = {"arag": [1.0 if c else float(rng.uniform(0.1, 0.4)) for c in coin],
              "stuffing": [float(rng.uniform(0.1, 0.4)) if c else 1.0 for c in coin]}
    _, data = report(records_by(scores, tokens), slice_by=["document_tokens"])
    [inter] = data["analysis"].artifacts["interaction.jsonl"]
    assert inter["p_adjusted"] >= 0.05
    [key] = [c for c in data["analysis"].claims if c.kind == "interaction" and c.key]
    assert not key.decisive and "edge" not in key.figures
    assert data["answers"][0].mode != "crossover"


def _holm(p: list[float]) -> list[float]:
    order = np.argsort(p)
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_slice_difference_ci_adjusted_p_and_interaction_p_by_hand():
    rng = np.random.default_rng(5)
    n = 48
    tokens = [int(t) for t in rng.integers(1_000, 50_000, size=n)]
    a = [float(x) for x in rng.uniform(0, 1, size=n)]
    b = [float(x) for x in rng.uniform(0, 1, size=n)]
    _, data = report(records_by({"arag": a, "naive": b}, tokens), slice_by=["document_tokens"])
    rows = data["analysis"].artifacts["slices.jsonl"]
    assert len(rows) == 4 and {r["feature"] for r in rows} == {"document_tokens"}
    edges = np.quantile(tokens, [0.25, 0.5, 0.75])
    bounds = [min(tokens), *edges, max(tokens)]
    raw = []
    for i, r in enumerate(rows):
        lo, hi = bounds[i], bounds[i + 1]
        ids = [k for k, t in enumerate(tokens) if lo <= t < hi or (i == 3 and t == hi)]
        diff = np.array([a[k] - b[k] for k in ids])
        assert (r["lo"], r["hi"], r["n"]) == (pytest.approx(lo), pytest.approx(hi), len(ids))
        assert r["diff"] == pytest.approx(diff.mean())
        boots = diff[np.random.default_rng(0).integers(0, len(diff), (2000, len(diff)))].mean(1)
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(tuple(np.percentile(boots, [2.5, 97.5])))
        assert r["p"] == pytest.approx(wilcoxon(diff).pvalue)
        raw.append(r["p"])
    assert [r["p_adjusted"] for r in rows] == pytest.approx(_holm(raw))
    [inter] = data["analysis"].artifacts["interaction.jsonl"]
    diffs = np.array(a) - np.array(b)
    rho = spearmanr(tokens, diffs).statistic
    rng0 = np.random.default_rng(0)
    perms = np.argsort(rng0.random((2000, n)), axis=1)
    rx, ry = rankdata(tokens), rankdata(diffs)
    null = np.array([np.corrcoef(rx, ry[p])[0, 1] for p in perms])
    p = (1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / 2001
    assert inter["statistic"] == pytest.approx(rho) and inter["p"] == pytest.approx(p)
    assert set(inter) == {"feature", "a", "b", "metric", "n", "statistic", "p", "p_adjusted",
                          "test"}
    assert set(rows[0]) == {"feature", "bin", "lo", "hi", "a", "b", "metric", "n", "mean_a",
                            "mean_b", "diff", "ci_low", "ci_high", "p", "p_adjusted"}


def test_categorical_values_of_fewer_than_six_tasks_are_merged_and_small_slices_say_too_few():
    n = 30
    companies = ["ACME"] * 12 + ["BETA"] * 13 + ["C1", "C2", "C3", "C4", "C5"]
    rng = np.random.default_rng(2)
    a, b = list(rng.uniform(0, 1, n)), list(rng.uniform(0, 1, n))
    text, data = report(records_by({"arag": a, "naive": b}, [1000] * n, company=companies),
                        slice_by=["company"])
    rows = data["analysis"].artifacts["slices.jsonl"]
    assert [(r["bin"], r["n"], r["lo"]) for r in rows] == [("ACME", 12, None), ("BETA", 13, None),
                                                           ("other", 5, None)]
    assert rows[2]["p"] is None and rows[2]["p_adjusted"] is None
    assert "too few" in section(text, SECTION)
    [inter] = data["analysis"].artifacts["interaction.jsonl"]
    assert inter["test"] == "kruskal-wallis"


def test_explicit_edges_replace_the_quartiles():
    scores, tokens = crossover_records("arag", "naive")
    _, data = report(records_by(scores, tokens), slice_by=["document_tokens"],
                     slice_edges={"document_tokens": [8000, 12000]})
    rows = data["analysis"].artifacts["slices.jsonl"]
    assert [r["hi"] for r in rows][:2] == [8000, 12000] and rows[1]["lo"] == 8000


def test_one_system_gives_no_slices_and_says_so_and_a_missing_feature_is_named():
    scores, tokens = crossover_records("arag", "naive")
    _, one = report(records_by({"arag": scores["arag"]}, tokens), slice_by=["document_tokens"])
    [said] = slice_notes(one["analysis"])
    assert said.kind == "slices_no_pair" and not one["analysis"].artifacts
    _, old = report(records_by(scores, tokens), slice_by=["evidence_position"])
    [missing] = slice_notes(old["analysis"])
    assert missing.kind == "slices_missing_feature"
    assert missing.counts["feature"] == "evidence_position"


@pytest.mark.parametrize(("override", "says"), [
    ("report.slice_by=[document_length]", "The known features are ['document_tokens'"),
    ("report.slice_edges.document_tokens=[8000,4000]", "strictly increasing"),
    ("+report.slice_edges.company=[1,2]", "only a numeric feature has edges"),
])
def test_bad_slice_options_are_refused_before_anything_runs_with_the_fix(override, says):
    with pytest.raises(ConfigError, match="Fix:") as err:
        validate_config(compose_cfg([override]))
    assert says in str(err.value)


ECTSUM = SHARED / "ectsum"


@pytest.mark.slow  # ~12 s on the shared machine: real transcripts and the real ROUGE scorer
@pytest.mark.skipif(not (ECTSUM / "data").exists(),
                    reason=f"../shared/datasets not present: {ECTSUM} (clone ECTSum)")
def test_two_prediction_files_copying_the_reference_on_long_and_on_short_transcripts(make_cfg):
    """ECTSum's validation transcripts, scored by the real ROUGE scorer: one system's answers
    copy the reference on the longer half of the transcripts, the other's on the shorter
    half (elsewhere each answers with the transcript's first line)."""
    from arag.datasets import load_dataset
    from arag.records import Prediction
    from metrics import SCORERS
    from metrics.base import ScorerEnv
    from runners.evaluate import dataset_features, evaluate

    cfg = make_cfg("dataset=ectsum", f"dataset.root={ECTSUM}", "dataset.split=val",
                   "dataset.limit=60")  # slices of 15: above 13 pairs scipy's Wilcoxon needs no resampling
    ds = load_dataset(cfg.dataset, ROOT)
    features = dataset_features(ds)
    median = float(np.median([f.values["document_tokens"] for f in features.values()]))
    rouge = SCORERS.get("rouge").from_config(SCORERS.get("rouge").Options(), ScorerEnv())

    def answers(system: str, copies_long: bool) -> list[dict]:
        preds = []
        for task in ds.tasks:
            long = features[task.id].values["document_tokens"] > median
            opening = ds.corpus.documents[task.doc_ids[0]].lines[0]
            preds.append(Prediction(id=task.id, source=ds.name, system=system, model="given",
                                    task_type=task.task_type, question=task.question,
                                    doc_ids=list(task.doc_ids), ground_truth=task.reference,
                                    predicted=task.reference if long == copies_long else opening))
        return evaluate(preds, {t.id: t for t in ds.tasks}, ds.corpus, [], [rouge],
                        cfg.target_length, Stuffing, features=features)

    records = {"arag": answers("arag", True), "stuffing": answers("stuffing", False)}
    _, data = report(records, slice_by=["document_tokens"])
    [inter] = data["analysis"].artifacts["interaction.jsonl"]
    assert inter["p_adjusted"] < 0.05
    [key] = [c for c in data["analysis"].claims if c.kind == "interaction" and c.key]
    assert key.decisive and (key.figures["above"], key.figures["below"]) == ("arag", "stuffing")


def test_compare_page_filters_tasks_by_a_features_value_or_length_bin():
    import html
    import json
    import re

    from report import compare

    tokens = [1000 * (k + 1) for k in range(8)]
    companies = ["ACME", "BETA"] * 4
    records = records_by({"arag": [0.1] * 8, "naive": [0.2] * 8}, tokens, company=companies)
    rows = [row("arag"), row("naive")]
    page = compare.page(rows, records, "rouge2_f1", {}, "7", "Sweep")
    features = [json.loads(html.unescape(f)) for f in re.findall(r"data-features='([^']*)'", page)]
    assert [f["company"] for f in features] == companies
    bins = [f["document_tokens"] for f in features]
    assert len(set(bins)) == 4 and bins[0] == bins[1] != bins[2]  # quartiles of 8 tasks
    offered = json.loads(re.search(r"id='features'>(.*?)</script>", page).group(1))
    assert offered["company"] == ["ACME", "BETA"] and len(offered["document_tokens"]) == 4
    assert "<select id='feature'>" in page and "evidence_position" not in offered


def two_dataset_records(n: int = 30, seed: int = 3):
    """arag, naive and stuffing on two datasets whose task ids collide (t0, t1, ...): arag
    ahead on the long filings of one, behind on the short calls of the other."""
    rng = np.random.default_rng(seed)
    records, rows = {}, []
    for ds, base in (("ectsum", 2_000), ("financebench_qfs", 60_000)):
        tokens = [int(t) for t in rng.integers(base, base * 3, size=n)]
        for system in ("arag", "naive", "stuffing"):
            label = f"{system} dataset={ds}"
            ahead = 0.3 if (system == "arag") == (ds == "financebench_qfs") else 0.0
            records[label] = [rec(f"t{k}", None, tokens[k], doc_ids=[f"d{k}"], dataset=ds,
                                  rouge2_f1=float(rng.uniform(0.1, 0.4)) + ahead)
                              for k in range(n)]
            rows.append(row(label, system=system, agentic=system == "arag", dataset=ds,
                            retrieves=system != "stuffing"))
    return rows, records


def test_a_sweep_over_two_datasets_compares_within_each_and_slices_pooled_pairs():
    rows, records = two_dataset_records()
    text, data = build_report(rows, records, "t", ["rouge2_f1"],
                              options={"slice_by": ["document_tokens", "dataset"]})
    # every test pairs two runs of one dataset: same-id tasks of another are never paired
    assert data["decided"] and all(d.first["dataset"] == d.second["dataset"]
                                   for d in data["decided"])
    assert len(data["decided"]) == 6
    finding = section(text, "Key finding")
    assert finding.startswith("**Dataset `ectsum`** (arag dataset=ectsum, naive "
                              "dataset=ectsum, stuffing dataset=ectsum):")
    assert "**Dataset `financebench_qfs`**" in finding
    assert "dataset=ectsum** vs **naive dataset=financebench_qfs" not in finding
    assert data["answer"].startswith("On `ectsum`: Decided: naive dataset=ectsum beats arag "
                                     "dataset=ectsum")
    assert "On `financebench_qfs`: Decided: arag dataset=financebench_qfs beats naive " \
           "dataset=financebench_qfs" in data["answer"]
    assert "`ectsum` **30** of 30; `financebench_qfs` **30** of 30" in text
    paired = section(text, "Paired comparisons")
    assert "arag dataset=ectsum vs naive dataset=financebench_qfs" not in paired
    # the quality figures are each run's over its own dataset's tasks
    assert all(r["rouge2_f1_n"] == 30 for r in data["common_rows"])
    analysis = data["analysis"]
    inter = {(r["feature"], r["a"], r["b"]): r for r in analysis.artifacts["interaction.jsonl"]}
    length = inter[("document_tokens", "arag", "naive")]
    assert length["n"] == 60 and length["p_adjusted"] < 0.05  # both datasets' tasks pooled
    assert inter[("dataset", "arag", "naive")]["test"] == "kruskal-wallis"
    by_bin = [r for r in analysis.artifacts["slices.jsonl"] if r["feature"] == "dataset"
              and (r["a"], r["b"]) == ("arag", "naive")]
    for r in by_bin:  # a dataset's slice is exactly that dataset's paired comparison
        a = [x["rouge2_f1"] for x in records[f"arag dataset={r['bin']}"]]
        b = [x["rouge2_f1"] for x in records[f"naive dataset={r['bin']}"]]
        assert r["n"] == 30 and r["diff"] == pytest.approx(np.mean(a) - np.mean(b))
    [key] = [c for c in analysis.claims if c.kind == "interaction" and c.key and c.figures[
        "feature"] == "document_tokens" and c.runs == ("arag", "naive")]
    assert key.figures["datasets"] == ["ectsum", "financebench_qfs"]
    assert key.decisive and key.figures["above"] == "arag"


def test_pooled_length_slices_warn_that_length_may_stand_for_the_dataset():
    rows, records = two_dataset_records()
    _, data = build_report(rows, records, "t", ["rouge2_f1"],
                           options={"slice_by": ["document_tokens"]})
    [caveat] = slice_notes(data["analysis"])
    assert caveat.kind == "slices_pooled"
    assert caveat.counts["datasets"] == ["ectsum", "financebench_qfs"]
