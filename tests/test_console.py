"""What people look at, built from known rows and records: the self-contained report, the
per-task side-by-side page, the console's verdict, the headline metrics, the dry run's
judge estimate and the plots (no MLflow, no browser: tests/test_browser.py does those)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from report import compare, console, plots, report
from report.writers import html as writers_html
from report.writers import markdown as writers_md
from runners import dryrun
from runners.preflight import job_overrides
from tests.conftest import ROOT

ROWS = [
    {"run": "arag max_loops=8", "run_id": "r1", "system": "arag", "status": "FINISHED",
     "agentic": True, "retrieves": True, "rouge2_f1_mean": 0.25, "retrieval_recall_mean": 0.9,
     "cost_usd_per_task": 0.002,
     "cost_usd_uncached_per_task": 0.003, "latency_ms_p50": 450.0, "n_tasks": 2.0, "n_answered": 2.0,
     "n_errors": 0.0, "model_calls": 10.0, "model_calls_cached": 10.0, "max_loops": "8"},
    {"run": "stuffing", "run_id": "r2", "system": "stuffing", "status": "FINISHED",
     "agentic": False, "retrieves": False, "rouge2_f1_mean": 0.2,
     "cost_usd_per_task": 0.001, "cost_usd_uncached_per_task": 0.001,
     "latency_ms_p50": 50.0, "n_tasks": 2.0, "n_answered": 1.0, "n_errors": 1.0,
     "model_calls": 1.0, "model_calls_cached": 0.0, "max_loops": "8"},
]
RECORDS = {
    "r1": [{"id": "t1", "question": "Summarize T1.", "reference": "ref one", "predicted": "one",
            "rouge2_f1": 0.3, "context_chunk_ids": ["d#L1-4", "d#L5-9"],
            "gold_chunk_ids": ["d#L5-9"], "error_codes": ["O"]},
           {"id": "t2", "question": "Summarize T2.", "reference": "ref two", "predicted": "two",
            "rouge2_f1": 0.2, "context_chunk_ids": ["e#L1-3"]}],
    "r2": [{"id": "t1", "predicted": "uno", "rouge2_f1": 0.1},
           {"id": "t2", "predicted": None, "rouge2_f1": None, "error": "ModelError: 529",
            "error_kind": "overloaded"}],
}


def test_report_html_inlines_its_plots_and_report_md_names_them(tmp_path):
    (tmp_path / "comparison.png").write_bytes(b"\x89PNG fake")
    text = "# R\n\n![comparison](plots/comparison.png)\n\n![taxonomy](plots/error_taxonomy.png)\n"
    page = writers_html.to_html(text, "R", tmp_path)
    assert re.findall(r'src="([^"]+)"', page) == ['data:image/png;base64,iVBORyBmYWtl']
    md = writers_html.readable_markdown(text, {"plots/comparison.png"})
    assert "](plots/" not in md and "`plots/comparison.png`" in md
    assert "error_taxonomy" not in md  # a plot that was not drawn is not promised


def test_latency_note_names_the_runs_answered_from_the_cache():
    note = writers_md.latency_cache_note(ROWS)
    assert "arag max_loops=8 (10 of 10 model calls)" in note and "stuffing" not in note
    assert writers_md.latency_cache_note([ROWS[1]]) == ""


def test_compare_page_has_every_task_and_run_with_gold_errors_and_trace_links():
    traces = {"r1": {"t1": "tr-1", "t2": "tr-2"}}
    page = compare.page(ROWS, RECORDS, "rouge2_f1", traces, "7", "Sweep")
    for text in ("t1", "t2", "Summarize T1.", "ref two", "arag max_loops=8", "stuffing"):
        assert text in page
    assert "<span class='chunk gold'>d#L5-9</span>" in page
    assert "<span class='chunk'>d#L1-4</span>" in page and "1 of 2 gold" in page
    assert "gold not recorded" in page  # t2 has no gold ids: said, not guessed
    assert "error [overloaded]: ModelError: 529" in page and "error codes O" in page
    assert "data-route='/#/experiments/7/traces/tr-1'" in page
    assert " src=" not in page and "<link" not in page  # self-contained: nothing fetched


def test_a_trace_link_opens_that_trace_on_the_ui_port_set_when_the_page_was_written(
        monkeypatch):
    monkeypatch.setenv("ARAG_UI_PORT", "5123")
    page = compare.page(ROWS, RECORDS, "rouge2_f1", {"r1": {"t1": "tr-1"}}, "7", "Sweep")
    monkeypatch.setenv("ARAG_UI_PORT", "5999")  # a port set later moves no written link
    assert "href='http://127.0.0.1:5123/#/experiments/7/traces/tr-1'" in page
    assert "5999" not in page and "traces?" not in page  # the trace, not the Traces list


def test_compare_page_shows_where_each_ranking_put_the_gold():
    records = {"r1": [{**RECORDS["r1"][0], "top_hit_ids": ["d#L1-4", "d#L5-9"],
                       "gold_hit_ranks": [2]},
                      {**RECORDS["r1"][1], "top_hit_ids": ["e#L1-3"], "gold_hit_ranks": []}],
               "r2": RECORDS["r2"]}
    page = compare.page(ROWS, records, "rouge2_f1", {}, "7", "Sweep")
    assert "ranking: gold at rank 2</summary>" in page
    assert "<span class='chunk gold'>2. d#L5-9</span>" in page
    assert "ranking: no gold in the ranking" in page  # t2: the gold is nowhere in it
    assert page.count("<details class='ranking'>") == 2  # stuffing ranks nothing: no panel


def test_compare_page_folds_the_judges_reasoning_and_draws_the_sections_touched():
    sections = [{"doc_id": "d", "section": "Prepared remarks", "first_line": 1,
                 "last_line": 40, "touched": True},
                {"doc_id": "d", "section": "Q&A", "first_line": 41, "last_line": 90,
                 "touched": False}]
    judged = {**RECORDS["r1"][0], "geval_coverage": 2.0,
              "geval_coverage_reasoning": "Misses the <guidance>.\nFinal score: 2",
              "geval_guidance_covered": None, "geval_guidance_covered_reasoning": "Unclear.",
              "geval_faithfulness_reasoning": None, "sections_touched": sections,
              "section_coverage": 0.5}
    page = compare.page(ROWS, {"r1": [judged, RECORDS["r1"][1]], "r2": RECORDS["r2"]},
                        "rouge2_f1", {}, "7", "Sweep")
    assert ("<details class='reasoning'><summary>judge: coverage 2</summary><div class='out'>"
            "Misses the &lt;guidance&gt;.\nFinal score: 2</div></details>") in page
    assert "judge: guidance_covered no score</summary>" in page  # a configured dimension
    assert "judge: faithfulness" not in page  # no reply: no empty panel
    assert "sections touched 50%:" in page
    strip = page.split("<div class='sections'>", 1)[1].split("</div>", 1)[0]
    assert strip.count("class='section'") == 2 and "Q&amp;A" in strip
    assert "lines 41-90: not touched" in strip and "lines 1-40: touched" in strip


def result_of(rows, records, console_mode="summary", title="t"):
    """The report's model as the console reads it (``report.report.result_of``)."""
    return report.result_of(rows, records, title, options={"console": console_mode},
                            artifact_uri="file:///store/3/p1/artifacts/report.html",
                            run_id="p1", experiment_id="3")


def test_verdict_lists_every_run_the_finding_and_where_to_look():
    result = result_of(ROWS, RECORDS)
    text = console.verdict(result, "sqlite:///mlruns/mlflow.db")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("run "))
    assert lines[header].split() == ["run", "rouge2_f1", "n", "recall", "cost/task", "$",
                                     "spent/task", "$", "P50", "ms", "answered"]
    # each score on its common set (t1: stuffing errored on t2), its n beside it
    arag, stuffing = (lines[header + k].split() for k in (1, 2))
    assert arag[:5] == ["arag", "max_loops=8", "0.300", "1", "n/a"]
    assert arag[5:8] == ["0.00300", "0.00200", "450"] and arag[-1] == "2/2"  # no cache, spent
    assert stuffing[:3] == ["stuffing", "0.100", "1"] and stuffing[-1] == "1/2"  # one errored
    assert "report:  /store/3/p1/artifacts/report.html" in text
    assert "compare: /store/3/p1/artifacts/compare.html" in text
    assert "make ui, then http://127.0.0.1:5000/#/experiments/3/runs/p1/artifacts" in text
    server = console.verdict(result, "http://tracking:5000")
    assert "http://tracking:5000/#/experiments/3/runs/p1/artifacts" in server
    # everything, key finding included, with report.console=full
    everything = console.verdict(result_of(ROWS, RECORDS, "full"), "sqlite:///m.db")
    assert ("arag max_loops=8 vs stuffing (n=1 of 2: the tasks both answered; stuffing errored "
            "on 1): 0.300 vs 0.100") in everything


def test_headline_metrics_and_parent_metric_names():
    heads = console.headline_metrics(ROWS[1])
    assert heads == {"headline/rouge2_f1_mean": 0.2, "headline/cost_usd_per_task": 0.001,
                     "headline/cost_usd_uncached_per_task": 0.001,
                     "headline/latency_ms_p50": 50.0, "headline/n_tasks": 2.0}
    assert console.metric_label("arag max_loops=8") == "arag max_loops:8"
    assert console.metric_label("naive dataset/reference_model=x") == \
        "naive dataset_reference_model:x"


def test_pareto_front_keeps_only_runs_nothing_beats_on_cost_and_quality():
    points = [(0.0, 0.2), (0.001, 0.25), (0.002, 0.22), (0.003, 0.3), (0.0, 0.1)]
    assert plots.pareto_front(points) == [0, 1, 3]


def test_plots_draw_n_a_the_scatter_and_the_loop_curve_with_cost(tmp_path):
    rows = [dict(r, rouge2_f1_ci_low=0.1, rouge2_f1_ci_high=0.3) for r in ROWS]
    rows[1]["max_loops"] = "4"
    rows[1]["agentic"] = True
    assert plots.comparison_plot(rows, tmp_path).stat().st_size > 5_000
    assert plots.cost_quality_plot(rows, "rouge2_f1", tmp_path).exists()
    assert plots.loop_budget_curve(rows, "rouge2_f1", tmp_path).exists()
    assert plots.cost_quality_plot(rows, "geval_coverage", tmp_path) is None


def test_plots_that_would_say_nothing_are_a_sentence_saying_why(tmp_path):
    free = [dict(r, cost_usd_per_task=0.0, cost_usd_uncached_per_task=0.0) for r in ROWS]
    assert plots.cost_quality_plot(free, "rouge2_f1", tmp_path) is None
    assert "cost $0 per task" in plots.cost_plot_gap(free, "rouge2_f1")
    assert plots.cost_plot_gap(ROWS, "rouge2_f1") is None
    one_budget = [(5.0, 0.4), (5.0, 0.6)]
    assert plots.recall_vs_loops(one_budget, tmp_path) is None
    assert "used 5 loops" in plots.loops_plot_gap(one_budget)
    md, _ = report.build_report([dict(r, **free[i]) for i, r in enumerate(ROWS)], RECORDS, "R")
    assert "cost $0 per task" in md and "cost_vs_quality.png" not in md


def test_the_ranking_direction_is_one_edit_in_the_policy(monkeypatch):
    """Turn rouge2_f1 into a lower-is-better score in report.policy alone: the verdict,
    the console's order, the plots' Pareto front and the compare page's sort all follow."""
    from report import policy

    def verdict_and_order() -> tuple[str, list[str], list[int], dict[str, bool]]:
        finding = report.key_finding(ROWS, RECORDS, "rouge2_f1")
        result = report.ReportResult("p1", "3", ROWS, RECORDS, "rouge2_f1", "file:///r", finding)
        table = console.table(result.headline, "rouge2_f1").splitlines()[1:]
        front = plots.pareto_front([(0.001, 0.1), (0.002, 0.3)], "rouge2_f1")
        html = compare.page(ROWS, RECORDS, "rouge2_f1", {}, "7", "Sweep")
        directions = json.loads(html.split("id='directions'>", 1)[1].split("</script>", 1)[0])
        return finding, [line.split()[0] for line in table], front, directions

    finding, order, front, sort = verdict_and_order()
    assert "Best mean: arag max_loops=8 (0.300)" in finding and "higher is better" in finding
    assert order == ["arag", "stuffing"] and front == [0, 1] and sort["rouge2_f1"] is True
    real = policy.higher_is_better
    monkeypatch.setattr(policy, "higher_is_better",
                        lambda key: False if key == "rouge2_f1" else real(key))
    finding, order, front, sort = verdict_and_order()
    assert "Best mean: stuffing (0.100)" in finding and "lower is better" in finding
    assert order == ["stuffing", "arag"] and front == [0] and sort["rouge2_f1"] is False


def _judged_item(tid: str, reference: str, predicted: str | None, **kw):
    from arag.records import Prediction, Task
    from metrics import ScoringItem

    task = Task(tid, "summarization", ("d",), "Summarize.", reference)
    pred = Prediction(tid, "s", "arag", "m", "summarization", "Summarize.", ["d"], "",
                      predicted=predicted, error=None if predicted else "boom")
    return ScoringItem(pred, task, None, "context", 50, True, **kw)


def test_the_dry_run_prices_what_each_judged_scorer_declares(tmp_path):
    from arag.records import Chunk
    from metrics.base import Scorer, Scores
    from metrics.citations import CitationScorer
    from metrics.geval import GEvalScorer

    judge = dryrun.NoCallJudge()
    geval = GEvalScorer(judge, "anthropic/x", tmp_path, samples=3)
    answered = _judged_item("t1", "the reference", "an answer")
    failed = _judged_item("t3", "the reference", None)
    no_ref = _judged_item("t2", "", "an answer")
    requests = dryrun.judge_requests([geval], [answered, failed, no_ref], "anthropic/x", True)
    # 2 criteria to write + t1: 2 dimensions x 3 samples + taxonomy; t2: faithfulness only
    assert len(requests) == 2 + 2 * 3 + 1 + 3 + 1
    assert sum("criteria" in k for k in requests) == 2
    panel = dryrun.judge_requests([geval], [answered], "anthropic/y", False)
    assert not any("taxonomy" in k for k in panel)  # only the primary judge assigns codes

    class Rubric(Scorer):  # a new judged scorer: priced with no edit to runners/dryrun.py
        name = "rubric"
        metrics: list = []

        def score(self, items):
            return [Scores() for _ in items]

        def judge_requests(self, items, judge_id, primary):
            return {it.task.id: {"system": "s", "messages": [{"role": "user", "content": "q"}],
                                 "max_tokens": 50} for it in items if primary}

    assert set(dryrun.judge_requests([Rubric()], [answered], "x/y", True)) == {"rubric:t1"}

    chunk = Chunk("c1", "d", 1, 1, "[HDR]", ("The outlook is strong.",))
    cited = _judged_item("t4", "r", "The outlook is strong. [c:c1]\nRevenue was $5 million. "
                         "[c:c1]", cites=True, chunks={"c1": chunk})
    cited.prediction.context_chunk_ids = ["c1"]  # the model was shown c1
    cited.cited_answer = cited.prediction.predicted
    support = dryrun.judge_requests([CitationScorer(judge)], [cited], "x/y", True)
    # the claim without figures needs the judge; the one whose figure is not in the chunk too
    assert len(support) == 2 and all("Claim:" in r["messages"][0]["content"]
                                     for r in support.values())
    assert dryrun.judge_requests([CitationScorer(None)], [cited], "x/y", True) == {}
    with pytest.raises(AssertionError, match="no judge call"):
        judge.complete("s", [])


def test_total_line_splits_systems_judge_and_dataset():
    rows = [{"run": "a", "calls": 10, "cost_usd": 0.3, "parts": {"system": 0.1, "judge": 0.2}},
            {"run": "b", "calls": 5, "cost_usd": 0.1, "parts": {"system": 0.1}}]
    line = dryrun.total_line("sweep total", rows)
    assert line == ("[dry run] sweep total: 2 jobs, 15 calls, estimated cost $0.4000 "
                    "(system $0.2000, judge $0.2000)")


@pytest.mark.parametrize("overrides,size", [(["system=arag,naive,stuffing"], 3),
                                            (["system=arag,naive", "max_loops=2,4"], 4),
                                            (["system=naive"], 1)])
def test_sweep_size_counts_the_jobs(overrides, size):
    assert len(job_overrides(overrides)) == size  # the parent's n_jobs ("job 2/3")


def test_datasets_default_to_data_datasets_inside_the_repository():
    from tests.conftest import ROOT, compose_cfg

    for name in ("ectsum", "financebench", "financebench_qfs", "summedits"):
        root = compose_cfg([f"dataset={name}"]).dataset.root
        assert root.startswith("data/datasets/"), (name, root)
    assert "/data/datasets\n" in (ROOT / ".gitignore").read_text()  # a link or a folder
    assert Path(ROOT / "Makefile").read_text().count("data/datasets") >= 2


def test_make_ui_takes_a_port():
    import shutil
    import subprocess

    from tests.conftest import ROOT

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "ui", "PORT=5123"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert "--port 5123" in dry.stdout and "sqlite:///mlruns/mlflow.db" in dry.stdout


def test_the_console_verdict_opens_with_the_answer_then_the_caveats():
    rows = [dict(r, model_provider="offline", judge_provider="none", synthetic=True)
            for r in ROWS]
    result = result_of(rows, RECORDS)
    lines = [line for line in console.verdict(result, "sqlite:///m.db").splitlines() if line]
    assert " ".join(lines[:2]).startswith(result.answer[:60])
    caveats = [line for line in lines if line.startswith("! ")]
    assert lines.index(caveats[0]) < next(i for i, x in enumerate(lines) if x.startswith("run "))
    said = " ".join(caveats)
    assert "offline model (arag max_loops=8, stuffing)" in said and "not evidence" in said
    assert "no judge" in said and "synthetic" in said
    everything = console.verdict(result_of(rows, RECORDS, "full"), "sqlite:///m.db")
    assert "arag max_loops=8 vs stuffing (n=1 of 2" in everything and "Best mean:" in everything


def test_the_printed_address_and_trace_links_follow_the_ui_port(monkeypatch):
    monkeypatch.setenv("ARAG_UI_PORT", "5123")
    assert console.ui_url("sqlite:///mlruns/mlflow.db", "3", "p1") \
        == "make ui, then http://127.0.0.1:5123/#/experiments/3/runs/p1/artifacts"
    link = compare._answer({"predicted": "x"}, [], "#/experiments/3/traces")
    assert "href='http://127.0.0.1:5123/#/experiments/3/traces'" in link
    dry = subprocess.run(["make", "-n", "ui"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ARAG_UI_PORT": "5123"})
    assert "--port 5123" in dry.stdout
    monkeypatch.setenv("ARAG_UI_PORT", "http")
    with pytest.raises(ValueError, match="ARAG_UI_PORT='http' is not a port. Fix"):
        console.ui_url("sqlite:///x.db", "3", "p1")
