"""The decision, stated: ``report.decide_on`` names the metrics the verdict decides on, each
is tested on every pair of contenders, and the family's p-values are Holm-adjusted, both
shown in report.md and the parent's comparison table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from arag.config import ConfigError
from metrics.stats import holm
from report import console, verdict
from report.report import ReportResult, build_report, result_of
from runners.validation import validate_config
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import all_runs, client_for, compose_cfg
from tests.test_judge_sweep import cli, judge
from tests.test_report import rec, row, section

DECIDE = ["rouge2_f1", "geval_faithfulness"]


def judged(tid: str, k: int, rouge: float, faith: float) -> dict:
    return rec(tid, 3, rouge2_f1=rouge, geval_faithfulness=faith, document_tokens=1000 + k)


def three_systems() -> dict[str, list[dict]]:
    """arag ahead of naive on ROUGE-2 on 7 of 8 tasks, behind by the least on one (raw
    Wilcoxon p = 4/256 = 0.016); faithfulness about equal everywhere."""
    n = 8
    return {
        "arag": [judged(f"t{k}", k, 0.30 + 0.01 * k, 3 + k % 2) for k in range(n)],
        "naive": [judged(f"t{k}", k, 0.301 if k == 0 else 0.20 + 0.005 * k, 3 + (k + 1) % 2)
                  for k in range(n)],
        "stuffing": [judged(f"t{k}", k, 0.25 + 0.02 * (k % 3), 4 - k % 2) for k in range(n)],
    }


def test_every_decision_metric_gets_every_pair_tested_with_raw_and_holm_p():
    records = three_systems()
    rows = [row("arag"), row("naive"), row("stuffing")]
    text, data = build_report(rows, records, "t", DECIDE)
    assert data["keys"] == DECIDE
    decided = data["decided"]
    # 2 metrics x 3 pairs, the agent first in its pairs
    assert {(d.key, d.first["run"], d.second["run"]) for d in decided} == {
        (k, a, b) for k in DECIDE
        for a, b in (("arag", "naive"), ("arag", "stuffing"), ("naive", "stuffing"))}
    raw = [d.paired.p if d.paired else None for d in decided]
    assert [d.p_adjusted for d in decided] == holm(raw)
    assert all(d.family == sum(p is not None for p in raw) for d in decided)
    paired = section(text, "Paired comparisons")
    assert "`rouge2_f1`" in paired and "`geval_faithfulness`" in paired
    assert "Holm-adjusted together" in paired and "| Holm p |" in paired
    for d in decided:
        if d.paired is not None and d.paired.p is not None:
            body = paired.split(f"### `{d.key}`", 1)[1].split("###", 1)[0]
            line = next(x for x in body.splitlines()
                        if x.startswith(f"| {d.first['run']} vs {d.second['run']} |")
                        or x.startswith(f"| {d.second['run']} vs {d.first['run']} |"))
            assert f"| {d.paired.p:.3g} | {d.p_adjusted:.3g} |" in line
    finding = section(text, "Key finding")
    assert "`rouge2_f1`" in finding and "`geval_faithfulness`" in finding
    assert "Holm-adjusted over" in finding


def test_a_raw_p_below_005_that_holm_lifts_above_is_not_declared_and_says_why():
    records = three_systems()
    rows = [row("arag"), row("naive"), row("stuffing")]
    text, data = build_report(rows, records, "t", DECIDE)
    lifted = next(d for d in data["decided"] if d.key == "rouge2_f1"
                  and d.second["run"] == "naive")
    assert lifted.paired is not None and lifted.paired.p is not None
    assert lifted.paired.p < 0.05 <= (lifted.p_adjusted or 0)
    assert not lifted.paired.ci_includes_zero and not lifted.significant
    finding = section(text, "Key finding")
    line = next(x for x in finding.splitlines() if x.startswith("- **arag** vs **naive**")
                and "0.335" in x)
    assert "**no significant difference** (the test does not reject (adjusted p ≥ 0.05); " \
           "the CI excludes 0, but a difference needs both)" in line
    # one metric alone: a family of 3, the same pair significant
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    one = next(d for d in data["decided"] if d.second["run"] == "naive")
    assert one.family == 3 and one.significant and "arag is better" in section(text,
                                                                               "Key finding")


def test_the_default_decides_on_the_first_comparison_metric_any_run_has():
    records = three_systems()
    text, data = build_report([row("arag"), row("naive"), row("stuffing")], records, "t")
    assert data["keys"] == ["geval_coverage"]
    assert "Comparison metric: `geval_coverage` (higher is better); set by " \
           "`report.decide_on`" in text
    logged = [row(n, decide_on=DECIDE) for n in ("arag", "naive", "stuffing")]
    _, data = build_report(logged, records, "t")  # a rebuilt report reads what runs logged
    assert data["keys"] == DECIDE


def test_the_comparison_table_carries_each_runs_raw_and_adjusted_p():
    records = three_systems()
    rows = [row("arag"), row("naive"), row("stuffing")]
    _, data = build_report(rows, records, "t", DECIDE)
    result = ReportResult("p", "1", rows, records, DECIDE[0], "file:///r", "", keys=DECIDE,
                          decided=data["decided"])
    table = {r["run"]: r for r in console.comparison_rows(result.headline, DECIDE[0],
                                                          result.decided)}
    d = next(d for d in data["decided"] if d.key == "geval_faithfulness"
             and d.second["run"] == "stuffing" and d.first["run"] == "arag")
    assert table["arag"]["geval_faithfulness: p vs stuffing"] == (d.paired.p if d.paired
                                                                    else None)
    assert table["stuffing"]["geval_faithfulness: Holm p vs arag"] == d.p_adjusted
    assert table["arag"]["geval_faithfulness"] == pytest.approx(3.5)  # its mean, n beside
    assert table["arag"]["geval_faithfulness n"] == 8


def test_an_unknown_decision_metric_fails_at_the_start_naming_the_key_and_fix():
    cfg = compose_cfg(["report.decide_on=[rouge2,geval_faithfulness]"])
    with pytest.raises(ConfigError, match=r"report\.decide_on=.*Fix: report\.decide_on="):
        validate_config(cfg)


def test_the_paired_section_keeps_a_bounds_pair_for_reference_outside_the_family():
    records = three_systems()
    records["oracle"] = [judged(f"t{k}", k, 0.5, 5) for k in range(8)]
    rows = [row("arag"), row("naive"), row("oracle", bound=True)]
    text, data = build_report(rows, {k: v for k, v in records.items() if k != "stuffing"},
                              "t", ["rouge2_f1"])
    assert all("oracle" not in (d.first["run"], d.second["run"]) for d in data["decided"])
    assert re.search(r"\| arag vs oracle \|.*\| a bound: not decided on \|",
                     section(text, "Paired comparisons"))


def test_verdict_decisions_are_found_in_either_order_with_the_sign_turned():
    records = three_systems()
    rows = [row("arag"), row("naive")]
    sets = verdict.task_sets(rows, records)
    d = verdict.decisions(sets, ["rouge2_f1"])[0]
    turned = verdict.find([d], "rouge2_f1", rows[1], rows[0])
    assert turned is not None and turned.paired is not None and d.paired is not None
    assert turned.paired.mean_diff == -d.paired.mean_diff
    assert (turned.paired.ci_low, turned.paired.ci_high) == (-d.paired.ci_high,
                                                             -d.paired.ci_low)
    assert turned.better is d.better


@pytest.mark.slow
def test_a_judged_sweep_decides_on_the_metrics_it_is_told(tmp_path):
    with FakeAnthropic(judge) as fake:
        # two systems: one pair, two metrics, a family of two tests to adjust
        sweep = cli(tmp_path, fake.url, "-m", "system=naive,stuffing", "dataset=sample",
                    "metrics.scorers=[rouge,geval,length]",
                    "report.decide_on=[rouge2_f1,geval_faithfulness]")
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    client = client_for(tmp_path)
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    text = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                          str(tmp_path / "report"))).read_text()
    assert "The verdict decides on `rouge2_f1` (higher is better), `geval_faithfulness`" in text
    paired = text.split("## Paired comparisons", 1)[1].split("\n## ", 1)[0]
    for key in ("rouge2_f1", "geval_faithfulness"):
        body = paired.split(f"### `{key}`", 1)[1].split("###", 1)[0]
        assert "| Wilcoxon p | Holm p |" in body
        assert len([x for x in body.splitlines() if x.startswith("| naive vs stuffing |")]) == 1
    table = json.loads(Path(client.download_artifacts(
        parent.info.run_id, "comparison_table.json", str(tmp_path / "table"))).read_text())
    columns = table["columns"]
    for key in ("rouge2_f1", "geval_faithfulness"):
        assert f"{key}: p vs naive" in columns and f"{key}: Holm p vs naive" in columns
        assert f"{key}: p vs stuffing" in columns
    assert "geval_faithfulness" in columns


def test_cost_and_latency_the_records_lack_are_unknown_everywhere_never_zero():
    """A pipeline whose records carry no cost and no latency: the key finding, the report's
    cost table, the console and the parent's description say unknown and how many records
    lack it; aggregation logs no cost metric rather than 0."""
    from metrics.aggregate import aggregate
    from report.overview import description

    bare = [{**judged(f"t{k}", k, 0.3, 4), "cost_usd": None, "latency_ms": None}
            for k in range(4)]
    metrics = aggregate(bare)
    assert not [k for k in metrics if k.startswith(("cost_usd", "latency_ms_p"))]
    records = {"arag": bare, "naive": [{**r, "rouge2_f1": 0.2} for r in bare]}
    rows = [row("arag", **metrics), row("naive", **metrics)]
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    finding = section(text, "Key finding")
    assert "$0.00000" not in finding
    assert "arag (cost unknown (4 of 4 records lack it); P50 latency unknown (4 of 4 " \
           "records lack it))" in finding
    costs = section(text, "Cost and latency")
    assert ("| arag | 4 | 0 | 0 | unknown (4 of 4 records lack it) | unknown (4 of 4 records "
            "lack it) |" in costs)
    assert ("Total spent: unknown (no run's spend is known: records without cost, no spend "
            "journal): arag, naive." in costs)  # never $0
    result = result_of(rows, records, "t", ["rouge2_f1"])
    terminal = console.verdict(result, "sqlite:///mlruns/mlflow.db")
    assert "0.00000" not in terminal
    assert "cost unknown, not 0: arag, naive (4 of 4 records lack it)" in terminal
    assert "latency unknown, not 0: arag, naive (4 of 4 records lack it)" in terminal
    assert "| arag | 0.300 | 4 | n/a | unknown | unknown | unknown | 4/4 |" in description(result)


def test_the_answer_comes_first_in_the_console_the_report_and_the_mlflow_description():
    """One sentence answers the question before any caveat or figure; MLflow 3 folds a
    run's description to its first 100 px, so it opens the description alone."""
    from report.overview import description

    records = three_systems()
    rows = [row(n, synthetic=True) for n in ("arag", "naive", "stuffing")]
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    assert data["answer"].startswith("Decided: arag beats naive on rouge2_f1 (by ")
    assert "(Holm-adjusted over 3 tests)" in data["answer"]
    assert text.startswith(f"# t\n\n**Answer:** {data['answer']}\n")
    assert text.index("**Answer:**") < text.index("Caveats") < text.index("## Key finding")
    result = result_of(rows, records, "t", ["rouge2_f1"])
    terminal = console.verdict(result, "sqlite:///mlruns/mlflow.db").strip().splitlines()
    blank = terminal.index("")
    assert " ".join(x.strip() for x in terminal[:blank]) == data["answer"]  # wrapped to fit
    assert terminal[blank + 1].startswith("! synthetic dataset")
    note = description(result)
    assert note.startswith(f"**{data['answer']}**\n\n")
    assert note.index("Caveats") < note.index("**Verdict** (decided on `rouge2_f1`)")
    # nothing significant: said first too, with why
    flat = {k: [{**r, "rouge2_f1": 0.3} for r in v] for k, v in records.items()}
    _, data = build_report(rows, flat, "t", ["rouge2_f1"])
    assert data["answer"] == "Nothing decided on rouge2_f1: too few tasks to test (at most 8 " \
                             "shared; a test needs 6 that differ)."
    # testable, not significant: one count when every pair shares as many tasks
    mixed = {k: [{**r, "rouge2_f1": 0.3 + 0.01 * ((i * 7 + j * 3) % 5 - 2)}
                 for i, r in enumerate(v)] for j, (k, v) in enumerate(records.items())}
    _, data = build_report(rows, mixed, "t", ["rouge2_f1"])
    assert data["answer"].startswith("Nothing decided on rouge2_f1: no difference between ")
    assert "(Holm-adjusted over 3 tests, 8 shared tasks, small n)" in data["answer"]
    # and says what would decide: the closest pair, the rule's detectable difference there
    # and the tasks its observed difference would need (the answer's pending claim)
    [closest] = data["answers"][0].pending[:1]
    assert closest.figures["mdd"] > 0 and closest.figures["needed"] > 8
    assert f"detects {closest.figures['mdd']:.3f}" in data["answer"]


def test_each_pair_is_compared_on_the_tasks_both_answered_and_what_shrank_it_is_named():
    records = three_systems()
    reason = "prompt of ~9000 tokens exceeds the model's context (5000 minus 512 for output)"
    records["stuffing"] = records["stuffing"][:3] + [
        {**r, "rouge2_f1": None, "skipped": True, "skip_reason": reason}
        for r in records["stuffing"][3:]]
    rows = [row("arag"), row("naive"), row("stuffing")]
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    finding = section(text, "Key finding")
    # stuffing's skips do not shrink arag vs naive: all 8 tasks both answered
    assert "**arag** vs **naive** (n=8): " in finding
    assert (f"**arag** vs **stuffing** (n=3 of 8: the tasks both answered; stuffing skipped 5 "
            f"({reason}, `model.context_limit`)): ") in finding
    naive = next(d for d in data["decided"] if d.second["run"] == "naive")
    assert naive.paired is not None and naive.paired.n == 8


def test_a_loop_budget_sweep_compares_every_budget_with_the_largest_and_calls_ties_ties():
    recall2 = [0.1, 0.2, 0.1, 0.3, 0.2, 0.1, 0.2, 0.3]
    recall8 = [0.5, 0.4, 0.6, 0.5, 0.4, 0.6, 0.5, 0.45]

    def run(budget: int, recall: list[float]) -> list[dict]:
        return [rec(f"t{k}", None, rouge2_f1=r, loops=float(budget + 1)) for k, r in
                enumerate(recall)]

    records = {f"arag max_loops={b}": run(b, r) for b, r in
               ((2, recall2), (4, recall8), (8, recall8))}
    rows = [row(name, agentic=True, max_loops=name.rsplit("=", 1)[1], system="arag",
                cost_usd_per_task=0.0, cost_usd_uncached_per_task=0.0) for name in records]
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    finding = section(text, "Key finding")
    assert "**arag max_loops=2** vs **arag max_loops=8** (n=8): 0.188 vs 0.494" in finding
    assert ("**arag max_loops=4** vs **arag max_loops=8** (n=8): 0.494 vs 0.494: **a tie**, "
            "identical on all 8 tasks.") in finding
    assert "`plots/loop_budget_curve.png`" in finding and "max_loops + 1" in finding
    loops = section(text, "Retrieval and the loop budget")
    assert "sweep `max_loops` to see" not in loops and "max_loops + 1" in loops
    result = result_of(rows, records, "t", ["rouge2_f1"], options={"console": "full"})
    terminal = console.verdict(result, "sqlite:///mlruns/mlflow.db")
    assert "arag max_loops=2 vs arag max_loops=8" in terminal
    assert "loop_budget_curve.png" in terminal


def test_the_loop_budget_curve_draws_no_cost_axis_when_every_cost_is_zero(tmp_path,
                                                                        monkeypatch):
    from report import plots

    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig) or path)

    rows = [{"agentic": True, "max_loops": str(b), "rouge2_f1_mean": 0.1 * b,
             "retrieval_recall_mean": 0.1, "cost_usd_uncached_per_task": 0.0} for b in (2, 4)]
    path = plots.loop_budget_curve(rows, "rouge2_f1", tmp_path)
    assert path is not None
    assert len(drawn[0].axes) == 1  # no twin axis for a cost nobody paid
    rows[0]["cost_usd_uncached_per_task"] = 0.002
    plots.loop_budget_curve(rows, "rouge2_f1", tmp_path)
    assert len(drawn[1].axes) == 2


def test_a_sentence_about_document_length_on_few_tasks_says_small_n():
    lengths = [1000 * (k + 1) for k in range(9)]
    naive = [rec(f"t{k}", [2, 2, 2, 3, 3, 3, 5, 5, 5][k], n) for k, n in enumerate(lengths)]
    stuffing = [rec(f"t{k}", [4, 4, 4, 3, 3, 3, 3, 3, 3][k], n) for k, n in enumerate(lengths)]
    text, _ = build_report([row("naive"), row("stuffing")],
                           {"naive": naive, "stuffing": stuffing}, "t")
    finding = section(text, "Key finding")
    assert ("(small n: 3 tasks are too few to say this of long documents (6.3k tokens and above) "
            "in general).") in finding


def test_low_judge_panel_agreement_is_a_caveat():
    from report.analyses.caveats import caveat_notes
    from report.writers import markdown

    def caveats(rows):
        return markdown.banner(caveat_notes(rows))

    panel = {"judge_panel": ["claude-sonnet-4-6"], "geval_faithfulness_parse_failures": 0.0,
             "geval_coverage_parse_failures": 0.0}
    rows = [row("arag", **panel, judge_agreement_faithfulness=0.14,
                judge_agreement_coverage=0.8),
            row("naive", **panel, judge_agreement_faithfulness=0.32,
                judge_agreement_coverage=0.9)]
    banner = caveats(rows)
    assert ("The judges agree poorly on faithfulness (Krippendorff's alpha arag 0.14, naive "
            "0.32; below 0.667") in banner
    assert "agree poorly on coverage" not in banner
    agreeing = [{**r, "judge_agreement_faithfulness": 0.9} for r in rows]
    assert "agree poorly" not in caveats(agreeing)


def test_an_exact_tie_names_no_best_mean():
    """Three systems scoring 0.152 on every task: no run is "best", whichever sorts first."""
    records = {name: [rec(f"t{k}", None, rouge2_f1=0.152) for k in range(6)]
               for name in ("arag", "naive", "stuffing")}
    rows = [row(name) for name in records]
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    finding = section(text, "Key finding")
    assert "identical on all 6 tasks" in finding
    assert "Best mean" not in text and "Best:" not in text
    assert "No best mean: arag, naive, stuffing tie at 0.152: no winner is declared." in finding
