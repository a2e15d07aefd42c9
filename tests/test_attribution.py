"""Attribution: every gold fact blamed on retrieval or generation, every claim checked.

Planted pipelines with known causes are scored through ``runners.evaluate`` as a run
scores them (the system's declared context, the scorers in their configured order).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from arag.records import Corpus, Document, Prediction, Task
from arag.retrieval import build_chunks
from arag.systems import SYSTEMS
from metrics.attribution import AttributionScorer
from metrics.consistency import FactualConsistencyScorer
from runners.evaluate import evaluate
from tests.conftest import SHARED

# line n states a figure of its own: "$<n>0.5 million" (no two lines share one)
LINES = tuple(f"Segment {n} revenue was ${n}0.5 million, up {n}.5 percent from last year."
              for n in range(1, 31))
GOLD = (3, 4)
DOC = Document("D", LINES, company="Acme", period="Q3 2024")
CORPUS = Corpus({"D": DOC})
CHUNKS = build_chunks(CORPUS, 30, 0)  # two lines a chunk
REF = f"{LINES[2]} {LINES[3]}"


def chunks_of(*lines: int) -> list[str]:
    return list(dict.fromkeys(c.chunk_id for c in CHUNKS for n in lines if c.covers(n)))


def answer(task: Task, read: list[int], predicted: str, system: str = "naive") -> Prediction:
    """``system``'s answer to ``task`` after reading the chunks holding the lines ``read``."""
    ids = chunks_of(*read)
    return Prediction(id=task.id, source="s", system=system, model="m",
                      task_type="summarization", question=task.question, doc_ids=["D"],
                      ground_truth=task.reference, predicted=predicted,
                      retrieved_chunk_ids=ids, context_chunk_ids=ids)


def scored(task: Task, pred: Prediction, system: str = "naive", scorers=None) -> dict:
    (record,) = evaluate([pred], {task.id: task}, CORPUS, CHUNKS,
                         scorers or [AttributionScorer()], 50, SYSTEMS.get(system))
    return record


def planted(read: list[int], answer_lines: list[int], extra: str = "", system: str = "naive",
            task_id: str = "t1") -> dict:
    """The eval record of a pipeline that read the chunks of ``read`` and answered with the
    lines ``answer_lines`` verbatim (plus ``extra``)."""
    task = Task(task_id, "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    text = " ".join(LINES[n - 1] for n in answer_lines) + extra
    return scored(task, answer(task, read, text, system), system)


def test_a_pipeline_that_reads_and_copies_the_gold_lines_covers_every_fact():
    r = planted(read=[3, 4], answer_lines=[3, 4])
    assert r["attribution_covered_rate"] == 1.0
    assert r["attribution_not_retrieved_rate"] == r["attribution_retrieved_unused_rate"] == 0.0
    assert r["claim_recall"] == r["context_utilization"] == 1.0
    assert r["attribution_unsupported_rate"] == 0.0 and r["attribution_method"] == "text_match"
    assert {f["chunk_id"] for f in r["attribution_facts"]} <= set(chunks_of(3, 4))


def test_a_pipeline_that_reads_far_from_the_gold_misses_every_fact_in_retrieval():
    r = planted(read=[20, 25], answer_lines=[20, 25])
    assert r["attribution_not_retrieved_rate"] == 1.0
    assert r["attribution_covered_rate"] == 0.0 and r["claim_recall"] == 0.0
    assert r["attribution_unsupported_rate"] == 0.0  # what it said, it read


def test_a_pipeline_that_reads_the_gold_but_answers_from_other_lines_leaves_it_unused():
    r = planted(read=[3, 4, 20, 25], answer_lines=[20, 25])
    assert r["attribution_retrieved_unused_rate"] == 1.0
    assert r["context_utilization"] == 0.0 and r["claim_recall"] == 1.0
    assert [f["status"] for f in r["attribution_facts"]] == ["retrieved_unused"] * 2


def test_an_invented_figure_is_an_unsupported_claim_and_a_reference_figure_from_memory():
    r = planted(read=[3, 4], answer_lines=[3, 4], extra=" Margin reached 77.7 percent.")
    assert r["attribution_covered_rate"] == 1.0
    assert r["attribution_unsupported_rate"] == pytest.approx(1 / 3)
    claim = next(c for c in r["attribution_claims"] if "77.7" in c["text"])
    assert claim["status"] == "unsupported"
    # closed book: the reference's own figures are what the model knew, not what it read
    closed = planted(read=[], answer_lines=[3], system="closed_book")
    assert closed["attribution_from_memory_rate"] == 1.0
    assert closed["attribution_not_retrieved_rate"] == 0.5


def test_stuffing_reads_the_whole_document_so_nothing_is_unretrieved():
    r = planted(read=[], answer_lines=[20], system="stuffing")
    assert r["attribution_not_retrieved_rate"] == 0.0
    assert r["attribution_retrieved_unused_rate"] == 1.0


def test_an_outside_pipeline_without_context_gets_unknown_facts_and_the_claim_side():
    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    pred = Prediction.from_dict({"id": "t1", "source": "s", "system": "external",
                                 "model": "m", "task_type": "summarization",
                                 "question": "Summarize.", "doc_ids": ["D"],
                                 "ground_truth": REF, "predicted": LINES[19]})
    r = scored(task, pred, "external")
    assert r["attribution_not_retrieved_rate"] is None
    assert "does not say what context" in r["null_reasons"]["attribution_not_retrieved_rate"]
    assert [f["status"] for f in r["attribution_facts"]] == ["unknown", "unknown"]
    assert r["attribution_unsupported_rate"] == 0.0  # checked against its documents


def test_without_gold_lines_the_reference_sentences_are_the_facts():
    task = Task("t1", "summarization", ("D",), "Summarize.", REF)  # no gold location
    r = scored(task, answer(task, [3, 4, 20], LINES[2]))
    assert [f["status"] for f in r["attribution_facts"]] == ["covered", "retrieved_unused"]


CLAIMS = ("Claim: segment 3 revenue $30.5 million | Verdict: verified\n"
          "Claim: segment 4 revenue $40.5 million | Verdict: unsupported\n"
          "Claim: margin 77.7% | Verdict: contradicted")


class ClaimJudge:
    """Replies to the factual-consistency request as a judge would: one claim verified,
    one the context does not state (whose figure the reference has), one invented; then
    ``facts``, its lines on the gold facts."""

    name = model_id = "j"
    provider = "fake"

    def __init__(self, facts: str = "") -> None:
        self.calls = 0
        self.facts = facts

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        from arag.llm import Completion, Usage
        self.calls += 1
        text = CLAIMS + ("\n" + self.facts if self.facts else "")
        return Completion([{"type": "text", "text": text}], "end_turn", Usage(100, 20), "j")


def judged_scorers(judge) -> list:
    """factual_consistency then attribution, built as a run builds them."""
    from metrics import ScorerEnv, build_scorers

    cfg = SimpleNamespace(scorers=["factual_consistency", "attribution"])
    return build_scorers(cfg, ScorerEnv(judge=judge, judge_id="fake/j"))


def test_with_a_judge_the_factual_consistency_claims_decide_without_a_second_call():
    judge = ClaimJudge("Fact 1: reflected\nFact 2: not reflected")
    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    scorers = judged_scorers(judge)
    r = scored(task, answer(task, [3], LINES[2]), scorers=scorers)
    assert judge.calls == 1 and r["attribution_method"] == "judge"
    assert [c["status"] for c in r["attribution_claims"]] == ["supported", "from_memory",
                                                              "unsupported"]
    assert r["attribution_unsupported_rate"] == pytest.approx(1 / 3)
    rows = [json.loads(line) for line in
            scorers[1].artifacts()["attribution.jsonl"].splitlines()]
    assert {(r["kind"], r["method"]) for r in rows} == {("gold", "judge"), ("claim", "judge")}
    assert set(rows[0]) == {"task_id", "system", "repeat", "kind", "text", "status", "chunk_id",
                            "method"}


def test_the_report_says_how_often_text_matching_gives_the_judges_status():
    from report.analyses import Inputs, attribution
    from report.verdict import TaskSets

    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    # line 3 copied (both paths: covered); line 4 read, not copied, yet the judge says reflected
    r = scored(task, answer(task, [3, 4], LINES[2]),
               scorers=judged_scorers(ClaimJudge("Fact 1: reflected\nFact 2: reflected")))
    unjudged = planted([3, 4], [3])
    runs = [{"run": "naive", "run_id": "n"}, {"run": "stuffing", "run_id": "s"}]
    found = attribution.analysis(Inputs(runs, runs, {"n": [r], "s": [unjudged]},
                                        TaskSets(runs, [], {}, ["t1"]), [], []))
    (claim,) = [c for c in found.claims if c.kind == "attribution_agreement"]
    assert claim.runs == ("naive",)
    assert {k: (v["agree"], v["n"]) for k, v in claim.figures.items()} == {
        "facts": (1, 2), "claims": (2, 3)}


def test_gold_facts_the_judge_leaves_unanswered_are_text_matched_and_the_record_says_why():
    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    # line 3 read and copied; line 4 read, not copied: the judge answers only fact 2
    partial = scored(task, answer(task, [3, 4], LINES[2]),
                     scorers=judged_scorers(ClaimJudge("Fact 2: reflected")))
    assert [(f["status"], f["method"]) for f in partial["attribution_facts"]] == [
        ("covered", "text_match"), ("covered", "judge")]
    assert partial["attribution_facts"][1]["text_match_status"] == "retrieved_unused"
    assert partial["attribution_method"] == "mixed"
    assert "answers 1 of the 2 gold facts" in partial["attribution_unjudged"]
    # a claim check not told attribution follows asks nothing about gold facts
    alone = scored(task, answer(task, [3], LINES[2]),
                   scorers=[FactualConsistencyScorer(ClaimJudge(), ""), AttributionScorer()])
    assert {f["method"] for f in alone["attribution_facts"]} == {"text_match"}
    assert alone["attribution_unjudged"] is None


ECTSUM = SHARED / "ectsum"


def ectsum_records(make_cfg, *overrides: str) -> list[dict]:
    """Offline predictions of ECTSum val's first tasks, scored with attribution."""
    from arag.llm import make_model
    from runners.job import build_system, prepare
    from runners.settings import read

    cfg = make_cfg("dataset=ectsum", f"dataset.root={ECTSUM}", "dataset.split=val",
                   "dataset.limit=2", "metrics.scorers=[attribution]", *overrides)
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    predictions = [system.predict(task, "ectsum") for task in job.dataset.tasks]
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    return evaluate(predictions, {t.id: t for t in job.dataset.tasks}, job.dataset.corpus, chunks,
                    [AttributionScorer()], cfg.target_length, job.system_class)


def missed(records: list[dict]) -> dict[str, int]:
    facts = [f for r in records for f in r["attribution_facts"]]
    return {s: sum(f["status"] == s for f in facts) for s in ("not_retrieved", "retrieved_unused")}


# slow: naive's index embeds the documents (into the session's shared cache, where
# test_retrieval_sweep's ECTSum val sweep finds these two documents' sentences already embedded)
@pytest.mark.slow
@pytest.mark.skipif(not (ECTSUM / "data" / "final" / "val").is_dir(),
                    reason=f"../shared/datasets not present: {ECTSUM}")
def test_on_ectsum_val_naive_top1_misses_in_retrieval_and_stuffing_never(make_cfg):
    naive = missed(ectsum_records(make_cfg, "system=naive", "system.top_k=1"))
    stuffing = missed(ectsum_records(make_cfg, "system=stuffing"))
    assert naive["not_retrieved"] > naive["retrieved_unused"]
    assert stuffing["not_retrieved"] == 0 and stuffing["retrieved_unused"] > 0


def test_attribution_listed_before_the_claims_it_reuses_is_refused_with_the_order(make_cfg):
    from arag.config import ConfigError
    from runners.validation import validate_config

    cfg = make_cfg("metrics.scorers=[attribution,length,factual_consistency]")
    with pytest.raises(ConfigError, match=r"metrics.scorers.*attribution reads "
                       r"factual_consistency.*Fix: "
                       r"metrics.scorers=\[factual_consistency,attribution,length\]"):
        validate_config(cfg)


def sweep_inputs(n: int = 8):
    """A decided sweep of two planted runs over ``n`` tasks: stuffing wins on rouge2_f1 over
    naive, which read far from the gold."""
    from metrics.stats import Paired
    from report.analyses import Inputs
    from report.verdict import Decision, TaskSets

    naive = {"run": "naive", "run_id": "n", "system": "naive"}
    stuffing = {"run": "stuffing", "run_id": "s", "system": "stuffing"}
    records = {"n": [planted([20, 25], [20, 25], task_id=f"t{k}") for k in range(n)],
               "s": [planted([], [3, 20], system="stuffing", task_id=f"t{k}")
                     for k in range(n)]}
    won = Decision("rouge2_f1", stuffing, naive,
                   Paired(n, n, 0.2, 0.01, 0.1, 0.3, 0.001, n, 0, 0), p_adjusted=0.001)
    sets = TaskSets([naive, stuffing], [], {}, [f"t{k}" for k in range(n)])
    return Inputs([naive, stuffing], [naive, stuffing], records, sets, ["rouge2_f1"], [won])


def test_the_report_names_each_systems_main_cause_and_where_the_loser_falls_short(tmp_path):
    """Eight tasks, each missing its facts for one cause: the sign test names it (p = 2/256);
    the gap says where the loser falls short; the table and the plot show the counts."""
    from report import analyses
    from report.writers.markdown import section_of

    result = analyses.run_all(sweep_inputs())
    causes = {c.runs: c for c in result.claims if c.kind == "cause"}
    naive, stuffing = causes[("naive",)], causes[("stuffing",)]
    assert naive.key and naive.figures["cause"] == "not_retrieved" and naive.p < 0.05
    assert (naive.figures["not_retrieved"], naive.figures["retrieved_unused"]) == (16, 0)
    assert naive.figures["share_of_missed"] == 1.0 and naive.figures["unsupported_pooled"] == 0
    assert stuffing.figures["cause"] == "retrieved_unused" and stuffing.figures["missed"] == 8
    (gap,) = [c for c in result.claims if c.kind == "attribution_gap"]
    assert gap.runs == ("naive", "stuffing") and gap.key and gap.metric == "rouge2_f1"
    assert [s["cause"] for s in gap.figures["sides"]] == ["not_retrieved", "retrieved_unused"]
    text = section_of(result.claims)
    assert "![attribution](plots/attribution.png)" in text
    assert "| naive | 16 | 0 | 0 | 16 |" in text
    rows = result.artifacts["attribution.jsonl"]
    assert {(r["system"], r["kind"]) for r in rows} >= {("naive", "gold"), ("stuffing", "claim")}
    assert len({(r["task_id"], r["system"], r["repeat"]) for r in rows}) == 16
    drawn = [draw(tmp_path) for draw in result.plots]
    assert tmp_path / "attribution.png" in drawn and (tmp_path / "attribution.png").stat().st_size


def test_three_tasks_name_no_cause_however_one_sided():
    """Three of three tasks one way is p = 0.25 by the sign test: no cause is named."""
    from report import analyses

    result = analyses.run_all(sweep_inputs(3))
    naive = next(c for c in result.claims if c.kind == "cause" and c.runs == ("naive",))
    assert naive.figures["cause"] is None and naive.p == 0.25
    assert naive.figures["not_retrieved"] == 6


def test_compare_page_shows_each_tasks_causes_with_the_fact_text():
    from report.compare import details

    cell = details(planted([20, 25], [20, 25]))
    assert "not retrieved</b>: " + LINES[2] in cell


FIXTURES = Path(__file__).parent / "fixtures"


def test_an_aragpoc_style_trace_of_chunk_reads_is_located_as_the_context_read():
    """A foreign trace (tests/fixtures/aragpoc_trace.jsonl, every form docs/judging.md
    accepts) whose read calls carry the chunk text: those texts are what the pipeline read,
    so its gold facts get a cause instead of unknown; its search hits are not reads."""
    from arag.systems.predictions_file import read_predictions

    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    file = read_predictions(FIXTURES / "aragpoc_trace.jsonl", [task], CORPUS, CHUNKS,
                            allow_missing=False)
    pred = file.predictions["t1"]
    assert [c["lines"] for c in pred.contexts] == [[3, 4], [20, 21], [25], [26]]
    assert file.reads_from_traces == ["t1"]
    r = scored(task, pred, "external")
    assert r["attribution_retrieved_unused_rate"] == 1.0 and r["claim_recall"] == 1.0


def test_a_task_without_gold_or_reference_gets_only_the_claim_side_and_the_report_says_so():
    from report.analyses import Inputs, attribution
    from report.verdict import TaskSets

    task = Task("t1", "summarization", ("D",), "Summarize.", "")  # no gold, no reference
    r = scored(task, answer(task, [3], LINES[2] + " Margin reached 77.7 percent."))
    assert r["attribution_covered_rate"] is None and r["claim_recall"] is None
    assert "no gold facts" in r["null_reasons"]["attribution_covered_rate"]
    assert r["attribution_unsupported_rate"] == 0.5
    run = {"run": "naive", "run_id": "n"}
    found = attribution.analysis(Inputs([run], [run], {"n": [r]}, TaskSets([run], [], {}, ["t1"]),
                                        [], []))
    assert [(n.kind, n.runs) for n in found.notes] == [("attribution_no_gold", ("naive",))]


def test_on_a_paginated_filing_each_evidence_page_is_one_fact():
    from metrics.attribution import gold_locations
    from metrics.base import ScoringItem

    pages = tuple(1 + (n - 1) // 10 for n in range(1, 31))  # ten lines a page
    filing = Document("D", LINES, line_pages=pages)
    task = Task("t1", "qa", ("D",), "What was segment 3 revenue?", "$30.5 million",
                gold_lines={"D": (3, 4, 5, 21)})
    item = ScoringItem(answer(task, [3], LINES[2]), task, None, "", 50, True,
                       line_pages={"D": pages},
                       chunks={c.chunk_id: c for c in build_chunks(Corpus({"D": filing}), 30, 0)})
    facts = gold_locations(item)
    assert [text.count("\n") + 1 for text, _, _ in facts] == [3, 1]  # page 1: 3 lines; page 3


def test_the_judge_decides_which_gold_facts_are_reflected_in_the_claim_check_call(
        make_cfg, tmp_path, monkeypatch):
    """The real SDK against the fake Messages API: one request per task lists the gold
    facts; the judge's 'Fact 1: reflected / Fact 2: not reflected' decides covered versus
    retrieved-but-unused where text matching would say otherwise; the no-LLM status is
    kept beside, the run aggregates their agreement, and a re-score is served by the
    response cache."""
    from runners.job import make_scorers
    from runners.settings import read
    from tests.anthropic_fake import FakeAnthropic, text_reply

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    # read both gold lines; the answer paraphrases line 3 without its figures
    pred = answer(task, [3, 4], "Segment 3 revenue grew strongly from last year.")

    def judge(request: dict, n: int) -> dict:
        prompt = request["messages"][-1]["content"]
        assert f"1. {LINES[2]}\n2. {LINES[3]}\n" in prompt and "'Fact <n>: reflected'" in prompt
        return text_reply("Claim: segment 3 revenue grew | Verdict: verified\n"
                          "Claim: margin 77.7% | Verdict: contradicted\n"
                          "Fact 1: reflected\nFact 2: not reflected", request)

    with FakeAnthropic(judge) as fake:
        cfg = make_cfg("judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
                       f"cache.dir={tmp_path / 'cache'}",
                       "metrics.scorers=[factual_consistency,attribution]")
        records = [scored(task, pred, scorers=make_scorers(read(cfg))[0]) for _ in range(2)]
        assert len(fake.requests) == 1  # the second scoring: from the response cache
    r = records[1]
    assert all(r[k] == records[0][k] for k in r if k.startswith("attribution"))
    assert r["attribution_method"] == "judge" and r["attribution_unjudged"] is None
    assert [(f["status"], f["text_match_status"]) for f in r["attribution_facts"]] == [
        ("covered", "retrieved_unused"), ("retrieved_unused", "retrieved_unused")]
    assert r["attribution_covered_rate"] == r["attribution_retrieved_unused_rate"] == 0.5
    assert r["attribution_not_retrieved_rate"] == 0.0 and r["context_utilization"] == 0.5
    assert [(c["status"], c["text_match_status"]) for c in r["attribution_claims"]] == [
        ("supported", "supported"), ("unsupported", "unsupported")]
    run = AttributionScorer().aggregate(records[:1], records[:1])
    assert (run["attribution_agreement_facts"], run["attribution_agreement_facts_n"]) == (0.5, 2)
    assert (run["attribution_agreement_claims"], run["attribution_agreement_claims_n"]) == (1, 2)
    # with no judged fact or claim there is no agreement to report (never a 0)
    assert AttributionScorer().aggregate([], [planted([3, 4], [3, 4])]) == {}


def test_a_claim_checked_into_fewer_statements_against_the_reference_is_unsupported():
    """Against the context a claim makes two statements (its negation, which the context
    supports, and a contradiction the context's closest sentence shows); against a short
    reference, one. The unsupported statement is not in the reference's checks: the claim
    is unsupported, not an error (ECTSum train: "... where the management team is not
    together ...", which stopped a sweep with an IndexError)."""
    from metrics.attribution import UNSUPPORTED, claim_status
    from metrics.factcheck import statements

    claim = ("This is the first call that we've ever done where the management team is not "
             "together in one location.")
    context = ("We have not done a call apart before. The management team is not together "
               "today. Revenue was $10.5 million.")
    reference = "Acme q1 loss per share $0.33."
    against_context, against_reference = statements(claim, context), statements(claim, reference)
    assert len(against_context) > len(against_reference)
    assert any(not st.supported for st in against_context)
    task = Task("t9", "summarization", ("D",), "Summarize.", reference)
    item = SimpleNamespace(task=task)
    assert claim_status(item, claim, context) == UNSUPPORTED
