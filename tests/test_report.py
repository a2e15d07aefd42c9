"""The sweep report's verdict: one task set per comparison, no winner without significance,
caveats, the breakdown by document length, and the judge's trustworthiness."""

from __future__ import annotations

import re

from report.report import build_report


def row(name: str, **extra) -> dict:
    base = {"run": name, "run_id": name, "status": "FINISHED", "system": name,
            "agentic": name == "arag", "retrieves": name != "stuffing",
            "model_provider": "anthropic", "judge_provider": "anthropic", "judge": "haiku",
            "synthetic": False, "target_length": "50", "judge_panel": [], "judge_samples": "1",
            "judge_calls": 10.0}
    return {**base, **extra}


def rec(tid: str, score: float | None, tokens: int = 1000, **extra) -> dict:
    return {"id": tid, "geval_coverage": score, "document_tokens": tokens, "error": None,
            "skipped": False, "null_reasons": {}, "predicted": f"summary of {tid}",
            "reference": "ref", "question": "q", **extra}


def skipped(tid: str, tokens: int = 9000) -> dict:
    return {"id": tid, "geval_coverage": None, "document_tokens": tokens, "error": None,
            "skipped": True, "null_reasons": {"geval_coverage": "skipped: too long"}}


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].strip()


def test_nothing_is_ranked_on_tasks_another_run_did_not_answer():
    # arag's own mean (3.5 over 6) beats stuffing's (3.0 over 3), but on the 3 tasks both
    # answered stuffing scores higher: only that comparison may be made
    arag = [rec(f"t{k}", s, 1000 * (k + 1)) for k, s in enumerate([5, 5, 5, 2, 2, 2])]
    stuffing = [skipped("t0"), skipped("t1"),
                {**skipped("t2"), "skipped": False, "error": "ModelError: overloaded"},
                rec("t3", 3, 4000), rec("t4", 3, 5000), rec("t5", 3, 6000)]
    rows = [row("arag", geval_coverage_mean=3.5, n_answered=6),
            row("stuffing", geval_coverage_mean=3.0, n_answered=3)]
    text, data = build_report(rows, {"arag": arag, "stuffing": stuffing}, "t")
    assert "**3 tasks every compared run answered** (of 6 in the sweep)" in text
    finding = section(text, "Key finding")
    assert finding.startswith("On the **3 tasks**")
    assert ("**arag** vs **stuffing** (n=3 of 6: the tasks both answered; stuffing skipped 2 "
            "(no reason given); stuffing errored on 1): 2.000 vs 3.000") in finding
    assert "too few to test" in finding and "no winner is declared" in finding
    assert "Best: **" not in finding
    paired = section(text, "Paired comparisons")
    assert "| arag vs stuffing | 3 (3 untied) | -1.000 |" in paired and "too few to test" in paired
    # the comparison plot draws common-task means; each run's own mean is shown apart
    assert {r["run"]: r["geval_coverage_mean"] for r in data["common_rows"]} == \
        {"arag": 2.0, "stuffing": 3.0}
    quality = section(text, "Quality")
    assert "| arag | 2.000 [2.000, 2.000] (n=3; small n: CI unreliable) |" in quality
    assert "| arag | 3.500 |" in quality and "| arag | 6 |" in quality  # its own 6 tasks
    examples = section(text, "Examples chosen from the numbers")
    assert not re.search(r"`t[012]`", examples)  # examples come from the common tasks only
    by_length = section(text, "By document length")
    assert "| stuffing | unknown (n=0) | 3.000 (n=1) | 3.000 (n=2) |" in by_length


def test_a_difference_whose_ci_includes_zero_has_no_winner():
    first = [5, 1, 4, 2, 5, 1, 3, 2]
    second = [1, 5, 2, 4, 1, 5, 2, 3]
    records = {"a": [rec(f"t{k}", s) for k, s in enumerate(first)],
               "b": [rec(f"t{k}", s) for k, s in enumerate(second)]}
    text, _ = build_report([row("a"), row("b")], records, "t")
    finding = section(text, "Key finding")
    assert "**no significant difference**" in finding and "the CI includes 0" in finding
    assert "minimum detectable difference" in finding


def test_a_significant_difference_names_the_winner_and_its_detectable_difference():
    records = {"a": [rec(f"t{k}", 4 + k % 2) for k in range(12)],
               "b": [rec(f"t{k}", 2 + (k % 3 == 0)) for k in range(12)]}
    text, _ = build_report([row("a"), row("b")], records, "t")
    finding = section(text, "Key finding")
    assert "Best: **a** (4.500), significantly ahead of b" in finding
    assert "**significant**, a is better" in finding and "over 12 untied pairs" in finding
    assert re.search(r"\*\*minimum detectable difference\*\* over these 12 tasks is \d\.\d{3}", finding)
    assert "would take about" not in finding  # the observed difference is detectable


def test_a_small_difference_says_how_many_tasks_would_detect_it():
    records = {"a": [rec(f"t{k}", [4, 5, 3, 4, 5, 2, 4, 3][k]) for k in range(8)],
               "b": [rec(f"t{k}", [4, 4, 4, 4, 4, 3, 3, 3][k]) for k in range(8)]}
    text, _ = build_report([row("a"), row("b")], records, "t")
    finding = section(text, "Key finding")
    # 5 of 8 pairs differ: the rule cannot reach 80% power over 8 tasks, whatever the difference
    assert "cannot be computed: over 8 tasks the rule declares even a huge difference" in finding
    assert re.search(r"Declaring the observed difference \(0.125\) would take about [\d,]+ "
                     r"tasks", finding)


def test_the_caveat_banner_names_offline_models_missing_judges_and_synthetic_data():
    records = {"a": [rec("t0", 4)], "b": [rec("t0", 3)]}
    plain, _ = build_report([row("a"), row("b")], records, "t")
    assert "Caveats" not in plain.split("Runs:", 1)[0]
    rows = [row("a", model_provider="offline", judge_provider="none", synthetic=True), row("b")]
    text, _ = build_report(rows, records, "t")
    banner = text.split("Runs:", 1)[0]
    assert "The model is `offline` (a)" in banner and "No judge (a)" in banner
    assert "synthetic" in banner


def test_an_agent_answering_without_tool_calls_is_a_caveat_and_void_when_it_never_called_one():
    records = {"arag": [rec("t0", 4), rec("t1", 4)], "naive": [rec("t0", 3), rec("t1", 3)]}

    def banner(arag: float, naive: float) -> str:
        rows = [row("arag", n_answered=2, tasks_without_tool_call=arag),
                row("naive", n_answered=2, tasks_without_tool_call=naive)]
        return build_report(rows, records, "t")[0].split("Runs:", 1)[0]

    void = banner(2.0, 0.0)
    assert "`arag`: the model called no tool on any of its 2 answered tasks" in void
    assert "**the agentic comparison is void for this run**" in void
    assert 'a model tagged "tools"' in void and "system=naive,stuffing only" in void
    partial = banner(1.0, 0.0)
    assert "`arag`: 1 of 2 answered tasks had no tool call" in partial
    assert "void" not in partial
    assert "Caveats" not in banner(0.0, 2.0)  # only an agentic run's count is read


def test_an_agent_that_called_no_tool_is_named_as_closed_book_in_the_key_finding():
    records = {s: [rec(f"t{k}", 4 if s == "arag" else 3) for k in range(8)]
               for s in ("arag", "naive")}
    for calls_none, expected in ((8.0, "**arag (called no tool: closed-book)** vs **naive**"),
                                 (3.0, "**arag** vs **naive**")):
        rows = [row("arag", n_answered=8, tasks_without_tool_call=calls_none), row("naive")]
        finding = section(build_report(rows, records, "t")[0], "Key finding")
        assert expected in finding, finding


def test_the_judge_section_shows_spread_agreement_and_the_widest_disagreements():
    panel = {"sonnet": {"coverage": 1.0, "coverage_reasoning": "Sonnet: misses guidance.",
                        "faithfulness": 4.0, "faithfulness_reasoning": "ok"}}
    records = {"a": [rec("t0", 5, geval_coverage_reasoning="Haiku: all there.",
                         geval_panel=panel), rec("t1", 3)],
               "b": [rec("t0", 3), rec("t1", 3)]}
    rows = [row("a", judge_panel=["sonnet"], judge_samples="3", geval_coverage_mean=4.0,
                geval_coverage_judge_sd_mean=0.4, judge_agreement_coverage=0.55,
                judge_agreement_coverage_ci_low=0.2, judge_agreement_coverage_ci_high=0.8,
                judge_agreement_coverage_n=2.0), row("b", geval_coverage_mean=3.0)]
    text, _ = build_report(rows, records, "t")
    judge = section(text, "The judge")
    assert "| a | 3 | unknown | 0.400 |" in judge
    assert "0.550 [0.200, 0.800] (n=2)" in judge
    assert "`t0` (a), coverage: primary judge 5.00, sonnet 1.00 (gap 4.00)" in judge
    assert "Haiku: all there." in judge and "Sonnet: misses guidance." in judge


def test_a_panel_judge_that_reverses_a_ranking_is_said_in_the_key_finding():
    def judged(tid: str, primary: float, panel: float) -> dict:
        return rec(tid, 3, geval_faithfulness=primary, geval_panel={"sonnet": {
            "faithfulness": panel, "faithfulness_reasoning": "r",
            "coverage": 3.0, "coverage_reasoning": "r"}})

    # the primary judge puts a above b on faithfulness; sonnet puts b above a
    records = {"a": [judged(f"t{k}", 4, 2) for k in range(4)],
               "b": [judged(f"t{k}", 3, 4) for k in range(4)]}
    rows = [row("a", judge_panel=["sonnet"]), row("b", judge_panel=["sonnet"])]
    finding = section(build_report(rows, records, "t")[0], "Key finding")
    assert ("The panel judge sonnet reverses the primary judge's ranking on faithfulness "
            "(a minus b: primary judge +1.00, sonnet -2.00, on 4 tasks)") in finding
    assert "on coverage" not in finding  # both judges tie a and b there: nothing reversed
    agreeing = {run: [judged(r["id"], r["geval_faithfulness"], r["geval_faithfulness"])
                      for r in recs] for run, recs in records.items()}
    again = section(build_report(rows, agreeing, "t")[0], "Key finding")
    assert "reverses" not in again


def test_a_capped_run_is_counted_over_every_task_with_the_journals_spend():
    from report.console import table
    from report.writers.verdict_words import stopped_words

    records = {"arag": [rec(f"t{k}", 4) for k in range(4)],
               "naive": [rec(f"t{k}", 3) for k in range(6)]}
    capped = row("arag", status="KILLED", n_tasks=4.0, n_not_run=2.0, n_answered=4.0,
                 cost_usd_total=0.0032, cost_usd_spent_total=0.00633)
    text, data = build_report([capped, row("naive", n_tasks=6.0, n_answered=6.0)], records, "t")
    said = "stopped by the cost cap: 4 of 6 tasks run, 2 not run, spent $0.0063"
    assert stopped_words(capped) == said and said in text
    assert "spent $0.0032" not in text
    [arag] = [r for r in data["headline"] if r["run"] == "arag"]
    assert arag["n_asked"] == 6 and "4/6" in table([arag], "geval_coverage")


def test_error_taxonomy_shows_the_judges_p_beside_the_paths_mechanical_p():
    records = {"arag": [rec("t0", 2)], "naive": [rec("t0", 3)]}
    rows = [row("arag", geval_coverage_mean=2.0, error_rate_P=1.0, trajectory_p_mean=1.0,
                trajectory_judge_agreement_P=1.0),
            row("naive", geval_coverage_mean=3.0, error_rate_P=0.0)]
    text, _ = build_report(rows, records, "t")
    taxonomy = section(text, "Error taxonomy")
    assert "**P** premature termination" in taxonomy and "**IC** incoherence" in taxonomy
    assert "| arag | unknown | unknown | unknown | 1.000 | unknown | unknown | unknown |" in taxonomy
    assert "| arag | 1.000 | 1.000 | unknown | unknown |" in taxonomy
    assert "| naive | unknown | unknown | unknown | 0.000 | unknown | unknown | unknown |" in taxonomy
    assert "| naive | not agentic | not agentic | not agentic | not agentic |" in taxonomy


def test_a_run_without_the_metric_does_not_shrink_its_task_set():
    # stuffing fits only 2 of 8 filings and has no retrieval metric at all: arag and naive
    # are still compared on retrieval precision over every task both answered
    def ret(tid: str, precision: float) -> dict:
        return rec(tid, None, retrieval_precision=precision, reference=None)

    arag = [ret(f"t{k}", 0.8 if k % 4 else 0.6) for k in range(8)]
    naive = [ret(f"t{k}", 0.2 if k % 4 else 0.4) for k in range(8)]
    stuffing = [rec("t0", None), rec("t1", None)] + [skipped(f"t{k}") for k in range(2, 7)]
    # (t7 has no stuffing record at all: a run stopped before it)
    rows = [row("arag"), row("naive"), row("stuffing")]
    text, _ = build_report(rows, {"arag": arag, "naive": naive, "stuffing": stuffing}, "t")
    assert "**2 tasks every compared run answered** (of 8 in the sweep)" in text
    finding = section(text, "Key finding")
    assert finding.startswith("On the **8 tasks** every run with `retrieval_precision` "
                              "(arag, naive) answered")
    assert "**arag** vs **naive** (n=8): 0.750 vs 0.250" in finding
    assert "**significant**, arag is better" in finding
    paired = section(text, "Paired comparisons")
    assert "| arag vs naive | 8 (8 untied) | 0.500 |" in paired
    examples = section(text, "Examples chosen from the numbers")
    assert "arag beats every other run" in examples and "`t7`" in examples  # not only t0, t1
    # no reference (no reference model): the example says so and why, not an empty block
    assert "**Reference:** none: the task has none" in examples and "```\n\n```" not in examples


def test_the_key_finding_says_where_retrieval_adds_value_by_document_length():
    lengths = [1000 * (k + 1) for k in range(9)]  # terciles: t0-t2 short, t6-t8 long
    naive = [rec(f"t{k}", [2, 2, 2, 3, 3, 3, 5, 5, 5][k], n) for k, n in enumerate(lengths)]
    stuffing = [rec(f"t{k}", [4, 4, 4, 3, 3, 3, 3, 3, 3][k], n) for k, n in enumerate(lengths)]
    rows = [row("naive"), row("stuffing")]
    text, _ = build_report(rows, {"naive": naive, "stuffing": stuffing}, "t")
    finding = section(text, "Key finding")
    assert ("Retrieval does not add value for short documents (below 3.7k tokens) on "
            "`geval_coverage`: `geval_coverage` naive 2.000 vs stuffing 4.000 on 3 tasks, "
            "difference -2.000 [95% CI -2.000, -2.000], because stuffing, reading the whole "
            "document, scores better") in finding
    assert ("Retrieval adds value for long documents (6.3k tokens and above) on `geval_coverage`: "
            "`geval_coverage` naive 5.000 vs stuffing 3.000 on 3 tasks") in finding
    too_long = stuffing[:6] + [skipped(f"t{k}", lengths[k]) for k in (6, 7, 8)]
    text, _ = build_report(rows, {"naive": naive, "stuffing": too_long}, "t")
    assert ("Retrieval is the only option for long documents (6.3k tokens and above): stuffing "
            "skipped all 3 (over its context limit)") in section(text, "Key finding")
    mixed = [rec(f"t{k}", [4, 1, 5, 3, 3, 3, 2, 5, 3][k], n) for k, n in enumerate(lengths)]
    text, _ = build_report(rows, {"naive": mixed, "stuffing": stuffing}, "t")
    finding = section(text, "Key finding")
    assert "Retrieval does not clearly add value for long documents" in finding
    # a gap the CI cannot separate from 0 is said as such, never "score alike"
    assert ("naive 3.333 vs stuffing 3.000 on 3 tasks" in finding
            and "naive is ahead, but the CI includes 0: 3 tasks cannot tell the two apart"
            in finding and "alike" not in finding)


def test_the_oracle_is_a_bound_never_the_side_that_reads_whole_documents():
    lengths = [1000 * (k + 1) for k in range(9)]
    naive = [rec(f"t{k}", [2, 2, 2, 3, 3, 3, 5, 5, 5][k], n) for k, n in enumerate(lengths)]
    oracle = [rec(f"t{k}", 5, n) for k, n in enumerate(lengths)]
    # an oracle run logged without its long_context declaration does not retrieve either
    rows = [row("naive"), row("oracle", bound=True, retrieves=False)]
    text, _ = build_report(rows, {"naive": naive, "oracle": oracle}, "t")
    assert "reading the whole document" not in text and "By document length:" not in text


def test_loops_and_recall_are_correlated_with_a_ci():
    loops = [2, 3, 4, 5, 6, 7, 8, 9]
    recall = [0.1, 0.2, 0.2, 0.4, 0.5, 0.5, 0.8, 0.9]
    arag = [rec(f"t{k}", 3, loops=float(n), retrieval_recall=r)
            for k, (n, r) in enumerate(zip(loops, recall, strict=True))]
    text, _ = build_report([row("arag")], {"arag": arag}, "t")
    loop_section = section(text, "Retrieval and the loop budget")
    assert re.search(r"Spearman's rho \+0\.99 \[95% CI \+0\.9\d, \+1\.00\] over 8 agentic tasks:"
                     r" more loops go with higher recall", loop_section), loop_section
    flat = [{**r, "loops": 3.0} for r in arag]
    text, _ = build_report([row("arag")], {"arag": flat}, "t")
    assert "one of them never varies" in section(text, "Retrieval and the loop budget")


def test_the_quality_table_leaves_out_what_no_run_was_scored_on_and_names_it():
    records = {s: [rec(f"t{k}", None, rouge2_f1=0.1 * k) for k in range(3)]
               for s in ("arag", "naive")}
    text, _ = build_report([row("arag"), row("naive")], records, "t")
    quality = section(text, "Quality").split("Each run over all", 1)[0]
    header = next(line for line in quality.splitlines() if line.startswith("| run |"))
    assert "ROUGE-2" in header and "G-Eval coverage" not in header
    assert "Not scored in any run" in quality and "G-Eval coverage" in quality
