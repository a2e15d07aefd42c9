"""The verdict is like for like: one cost per task everywhere, every score on the task set
of the runs that have it, bounds never ranked, judge cost counted, small n said, unreadable
judge replies held to a threshold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arag.records import Prediction, Task
from metrics.base import ScoringItem
from report import console
from report.report import ReportResult, build_report, key_finding
from runners.errors import too_many_errors
from tests.test_report import rec, row, section, skipped


def costed(name: str, per_task: float, uncached: float, **extra) -> dict:
    return row(name, cost_usd_per_task=per_task, cost_usd_uncached_per_task=uncached,
               cost_usd_total=per_task * 4, n_tasks=4.0, **extra)


def test_cost_per_task_is_one_figure_in_console_parent_metrics_and_report():
    """Spend over every task run, without the response cache: the same number in the
    report's cost table, the key finding, the console and the parent's comparison table;
    a run that answered nothing but spent shows what it spent."""
    records = {"arag": [rec(f"t{k}", 4) for k in range(4)],
               "naive": [rec(f"t{k}", 3) for k in range(4)],
               "broken": [{**rec(f"t{k}", None), "error": "ModelError: 500"} for k in range(4)]}
    rows = [costed("arag", 0.002, 0.00316, n_answered=4.0),
            costed("naive", 0.001, 0.00158, n_answered=4.0),
            costed("broken", 0.00475, 0.00475, n_answered=0.0, n_errors=4.0)]
    text, _ = build_report(rows, records, "t")
    assert "| arag | 4 | 0 | 0 | $0.00316 | $0.00200 |" in section(text, "Cost and latency")
    finding = key_finding(rows, records, "geval_coverage")
    assert "arag $0.00316 (spent $0.00200" in finding
    assert "broken answered no task but spent $0.01900" in finding
    result = ReportResult("p", "1", rows, records, "geval_coverage", "file:///r", finding)
    table = console.table(result.headline, "geval_coverage").splitlines()
    arag_line = next(line for line in table if line.startswith("arag"))
    assert "0.00316" in arag_line and "0.00200" in arag_line
    broken = next(line for line in table if line.startswith("broken"))
    assert "0.00475" in broken  # not n/a: it spent money
    parent = {r["run"]: r for r in console.comparison_rows(result.headline, "geval_coverage")}
    assert parent["arag"]["cost/task ($)"] == 0.00316
    assert parent["broken"]["spent/task ($)"] == 0.00475


def test_judge_cost_is_in_the_report_total_and_the_finding():
    records = {"a": [rec(f"t{k}", 4) for k in range(3)], "b": [rec(f"t{k}", 3) for k in range(3)]}
    rows = [costed("a", 0.1, 0.1, judge_cost_usd_total=0.4),
            costed("b", 0.05, 0.05, judge_cost_usd_total=0.305)]
    text, _ = build_report(rows, records, "t")
    costs = section(text, "Cost and latency")
    assert "Total spent: $1.3050 new, paid this time (systems $0.6000, judge $0.7050)" \
        in costs
    assert "| $0.4000 |" in costs  # each run's judge cost in its row
    assert "The judge cost $0.7050 in all" in section(text, "Key finding")


def test_spend_is_what_was_paid_over_every_attempt_where_it_was_journaled():
    """A killed and continued run: its records and its last attempt's judge cost miss
    what the killed attempt paid; the journaled figures count it, and a run logged without
    them keeps what it has."""
    records = {"a": [rec(f"t{k}", 4) for k in range(3)], "b": [rec(f"t{k}", 3) for k in range(3)]}
    rows = [costed("a", 0.1, 0.1, cost_usd_spent_total=0.5, judge_cost_usd_total=0.1,
                   judge_cost_usd_spent_total=0.3),
            costed("b", 0.05, 0.05, judge_cost_usd_total=0.2)]
    text, _ = build_report(rows, records, "t")
    costs = section(text, "Cost and latency")
    assert "Total spent: $1.2000 new, paid this time (systems $0.7000, judge $0.5000)" \
        in costs
    assert "| $0.5000 | $0.3000 |" in costs  # run a: spent, judge cost
    assert "The judge cost $0.5000 in all" in section(text, "Key finding")
    heads = console.headline_metrics({"judge_cost_usd_total": 0.1,
                                      "judge_cost_usd_spent_total": 0.3})
    assert heads == {"headline/judge_cost_usd_spent_total": 0.3}


def test_spend_carried_over_or_reused_is_earlier_never_new_and_unknown_is_never_zero():
    """A resumed run's killed attempt, a run reused from an earlier sweep and replies served
    by the response cache each keep their original cost, shown apart from what this sweep
    paid; with no known spend at all the total is "unknown", not $0."""
    records = {"a": [rec(f"t{k}", 4) for k in range(3)], "b": [rec(f"t{k}", 3) for k in range(3)]}
    resumed = costed("a", 0.1, 0.1, cost_usd_spent_total=0.2, cost_usd_spent_earlier=0.3,
                     judge_cost_usd_spent_total=0.05, judge_cost_usd_spent_earlier=0.01)
    reused = costed("b", 0.05, 0.05, cost_usd_spent_total=0.4, judge_cost_usd_spent_total=0.1,
                    reused_run=True)
    cached = costed("c", 0.0, 0.02, cost_usd_spent_total=0.0, cost_usd_uncached_total=0.08)
    text, _ = build_report([resumed, reused, cached], {**records, "c": records["b"]}, "t")
    costs = section(text, "Cost and latency")
    assert "Total spent: $0.2500 new, paid this time (systems $0.2000, judge $0.0500)" \
        in costs
    assert "earlier: $0.8100, paid before" in costs  # journals that do not say who paid:
    assert "$0.8100 by earlier sweeps or attempts" in costs
    assert "reused from the response cache: $0.0800" in costs
    unknown = [row(n, cost_usd_total=None) for n in ("a", "b")]
    costs = section(build_report(unknown, records, "t")[0], "Cost and latency")
    assert "Total spent: unknown" in costs and "$0.0000" not in costs


def test_a_cost_mean_over_part_of_the_answered_tasks_is_logged_with_its_n_and_said():
    from metrics import aggregate

    records = [{**rec(f"t{k}", 4), "cost_usd": 0.01 if k < 15 else None} for k in range(20)]
    metrics = aggregate(records, [])
    assert metrics["cost_usd_answered_mean"] == pytest.approx(0.01)
    assert metrics["cost_usd_answered_mean_n"] == 15 and metrics["n_task_ids"] == 20
    assert "cost_usd_total" not in metrics  # a total over 15 of 20 would be made up
    assert "geval_coverage_mean_n" not in metrics  # every answered task has a score
    rows = [row("a", **metrics, cost_usd_total=None)]
    costs = section(build_report(rows, {"a": records}, "t")[0], "Cost and latency")
    assert "$0.01000 a task over 15 of 20 answered tasks, those that carry it" in costs


def test_a_run_that_failed_before_logging_its_spend_is_read_from_its_journal(tmp_path):
    from arag.llm.base import Usage
    from arag.llm.cache import SpendJournal
    from tracking.spend import annotate

    journal = SpendJournal(tmp_path / "spend.jsonl", attempt="now")
    SpendJournal(journal.path, attempt="killed").record(0.004, Usage(10, 5))
    for _ in range(8):
        journal.record(0.0015825, Usage(100, 20))
    failed = SimpleNamespace(info=SimpleNamespace(run_id="r", end_time=2, status="FAILED"),
                             data=SimpleNamespace(tags={"spend_journal": str(journal.path),
                                                        "spend_attempt": "now"}))
    rows = [{"run": "naive", "run_id": "r"}]
    annotate(rows, [failed], started=1)
    assert rows[0]["cost_usd_spent_total"] == pytest.approx(0.01266)
    assert rows[0]["cost_usd_spent_earlier"] == pytest.approx(0.004)


def test_a_bound_is_shown_as_a_bound_and_never_named_the_winner():
    records = {"oracle": [rec(f"t{k}", 5) for k in range(8)],
               "stuffing": [rec(f"t{k}", 3 + (k % 2)) for k in range(8)],
               "arag": [rec(f"t{k}", 2 + (k % 2)) for k in range(8)]}
    rows = [row("oracle", bound=True), row("stuffing"), row("arag")]
    finding = section(build_report(rows, records, "t")[0], "Key finding")
    assert "Best: **stuffing**" in finding and "Best: **oracle**" not in finding
    assert "Bounds (reference points, never ranked): oracle 5.000" in finding
    assert "**arag** vs **stuffing** (n=8)" in finding and "oracle** vs" not in finding
    result = ReportResult("p", "1", rows, records, "geval_coverage", "file:///r", finding)
    lines = console.table(result.headline, "geval_coverage").splitlines()
    assert lines[1].startswith("stuffing") and lines[-1].startswith("oracle (bound)")


def test_agent_and_naive_keep_their_n_where_stuffing_skips():
    """Stuffing answers 1 of 4 and has no retrieval score: A-RAG and naive are compared on
    retrieval precision over all 4 tasks both answered, in the quality table and the plot."""
    def ret(tid: str, precision: float) -> dict:
        return rec(tid, None, retrieval_precision=precision, rouge2_f1=precision / 2)

    records = {"arag": [ret(f"t{k}", 0.5 + k / 10) for k in range(4)],
               "naive": [ret(f"t{k}", 0.4) for k in range(4)],
               "stuffing": [rec("t0", None, rouge2_f1=0.2)] + [skipped(f"t{k}") for k in (1, 2, 3)]}
    text, data = build_report([row("arag"), row("naive"), row("stuffing")], records, "t")
    common = {r["run"]: r for r in data["common_rows"]}
    assert common["arag"]["retrieval_precision_n"] == common["naive"]["retrieval_precision_n"] == 4
    assert common["arag"]["rouge2_f1_n"] == 1  # stuffing has ROUGE: its skips count there
    quality = section(text, "Quality").split("Each run over all", 1)[0]
    arag_row = next(line for line in quality.splitlines() if line.startswith("| arag |"))
    assert "0.650 [" in arag_row and "0.650 [0.550, 0.750] (n=" not in arag_row


def test_a_ci_on_fewer_than_ten_pairs_carries_a_small_n_note():
    records = {"arag": [rec(f"t{k}", 4 + k % 2) for k in range(4)],
               "naive": [rec(f"t{k}", 3) for k in range(4)]}
    finding = section(build_report([row("arag"), row("naive")], records, "t")[0], "Key finding")
    assert "(n=4)" in finding and "small n: a bootstrap CI over 4 pairs is unreliable" in finding
    records = {k: [rec(f"t{i}", 4 + i % 2 if k == "arag" else 3) for i in range(12)]
               for k in ("arag", "naive")}
    finding = section(build_report([row("arag"), row("naive")], records, "t")[0], "Key finding")
    assert "small n" not in finding


def test_a_judge_that_ran_gets_its_section_whatever_it_scored():
    """Judged means a judge ran (FinanceBench comparison: faithfulness only, no reference)."""
    records = {"a": [rec("t0", None, geval_faithfulness=4.0)],
               "b": [rec("t0", None, geval_faithfulness=3.0)]}
    rows = [row("a", geval_faithfulness_mean=4.0), row("b", geval_faithfulness_mean=3.0)]
    text, _ = build_report(rows, records, "t")
    assert "## The judge" in text and "No judge: the error taxonomy" not in text
    text, _ = build_report([dict(r, judge_calls=0.0) for r in rows], records, "t")
    assert "## The judge" not in text


def test_resumed_latencies_are_labelled():
    records = {"a": [rec("t0", 4)], "b": [rec("t0", 3)]}
    measured = {"latency_ms_p50": 900.0}
    text, _ = build_report([row("a", n_resumed=1.0, n_tasks=1.0, **measured), row("b")],
                           records, "t")
    assert "Latency from an earlier run: a (1 of 1 answers)" in text
    # a sequential sweep's later rounds carry the earlier rounds' answers: not "resumed"
    sequential = {"order_seed": 0, "max_tasks": None}
    text, _ = build_report([row("a", n_resumed=1.0, n_tasks=1.0, sequential=sequential,
                                **measured), row("b", sequential=sequential)], records, "t")
    assert "Latency over rounds: a (1 of 1 answers) were answered in earlier rounds" in text
    assert "Latency from an earlier run" not in text


def test_an_unreadable_judge_field_on_most_tasks_fails_the_run():
    runner = SimpleNamespace(max_error_rate=0.0, retry_errors=True, max_parse_failure_rate=0.5)
    metrics = {"n_tasks": 40.0, "n_answered": 40.0, "n_errors": 0.0,
               "factual_consistency_parse_failures": 40.0, "judge_calls": 40.0}
    why = too_many_errors(metrics, runner)
    assert why is not None and "factual_consistency unreadable on 40 of 40" in why
    assert too_many_errors({**metrics, "factual_consistency_parse_failures": 2.0}, runner) is None
    text, _ = build_report([row("a", **metrics), row("b")],
                           {"a": [rec("t0", 4)], "b": [rec("t0", 3)]}, "t")
    assert "a: factual_consistency on 40 of 40 answered tasks" in text


def _item(**pred_fields) -> ScoringItem:
    pred = Prediction(id="t", source="s", system="arag", model="m", task_type="summarization",
                      question="q", doc_ids=["d"], ground_truth="r", predicted="a",
                      **pred_fields)
    task = Task(id="t", task_type="summarization", doc_ids=("d",), question="q", reference="r")
    return ScoringItem(pred, task, None, "", 50, True, agentic=True)


def test_answer_input_tokens_count_everything_the_answering_call_saw():
    """context_tokens counts the chunks; answer_input_tokens what the final call was sent
    (an agent's search results and snippets included), so the report can compare both."""
    from arag.trace import ModelCall
    from metrics.context import ContextScorer

    def call(tokens: int, cached: int = 0) -> ModelCall:
        return ModelCall(model="m", start_ms=0.0, latency_ms=1.0, stop_reason="end_turn",
                         usage={"input_tokens": tokens, "cache_read_input_tokens": cached},
                         cost_usd=0.0, cached=False)

    item = _item(trace=[call(900), call(1900, cached=186)])
    item.context_text, item.context_chunks = "x" * 4000, 5
    values = ContextScorer().score([item])[0].values
    assert values["context_tokens"] == 1000 and values["answer_input_tokens"] == 2086
    bare = _item()
    bare.context_chunks = 0
    scores = ContextScorer().score([bare])[0]
    assert scores.values["answer_input_tokens"] is None
    assert "no model call" in scores.null_reasons["answer_input_tokens"]
