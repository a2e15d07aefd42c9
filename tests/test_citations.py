"""Citations: parsed per claim, stripped before every other scorer, scored against the
chunks they name (figures, else the judge); the offline model cites when asked."""

from __future__ import annotations

from arag.citations import Claim, cite, claims, strip_citations
from arag.llm.base import ChatModel, Completion, Usage
from arag.llm.offline import OfflineModel
from arag.records import Chunk, Corpus, Document, Prediction, Task
from arag.systems import SYSTEMS
from arag.trace import ToolCall
from metrics.citations import CitationScorer, parse_supported
from metrics.numeric import NumericScorer
from metrics.retrieval import LengthScorer
from runners.evaluate import evaluate

A, B, C = "ACME_q3#L1-3", "ACME_q3#L4-6", "ACME_q3#L7-9"
CHUNKS = {
    A: Chunk(A, "ACME_q3", 1, 3, "[COMPANY: ACME | PAGE: 12]",
             ("Revenue rose 8% to $452 million.", "Margins held.", "Filler.")),
    B: Chunk(B, "ACME_q3", 4, 6, "[COMPANY: ACME]",
             ("Free cash flow was $88.6 million.", "We opened a plant in Ohio.", "More.")),
    C: Chunk(C, "ACME_q3", 7, 9, "[COMPANY: ACME]", ("Guidance is unchanged.", "x.", "y.")),
}


def test_claims_take_the_markers_they_stand_in_or_follow():
    text = ("Revenue rose 8% to $452 million [c:ACME_q3#L1-3]. Margins held. [c:ACME_q3#L1-3] "
            "Guidance is unchanged.\n- free cash flow $88.6 million [c:A#L1-2, c:B#L4-6; C#L7-9]"
            "\n\n[c:Z#L1-1]")
    assert claims(text) == [
        Claim("Revenue rose 8% to $452 million.", ("ACME_q3#L1-3",)),
        Claim("Margins held.", ("ACME_q3#L1-3",)),
        Claim("Guidance is unchanged.", ()),
        Claim("free cash flow $88.6 million", ("A#L1-2", "B#L4-6", "C#L7-9", "Z#L1-1")),
    ]
    assert strip_citations(text) == ("Revenue rose 8% to $452 million. Margins held. Guidance is "
                                     "unchanged.\n- free cash flow $88.6 million\n")
    assert strip_citations(None) is None and cite([A, B]) == f"[c:{A}, c:{B}]"


def item_for(answer: str, *, shown=(A, B), cites=True, system="naive"):
    """One scored task: the answer as written, the chunks the model was shown."""
    task = Task("t", "summarization", ("ACME_q3",), "Summarize Q3.", "revenue rose 8 percent.")
    pred = Prediction(id="t", source="s", system=system, model="m", task_type="summarization",
                      question=task.question, doc_ids=["ACME_q3"], ground_truth=task.reference,
                      predicted=answer, context_chunk_ids=list(shown))
    doc = Document("ACME_q3", tuple(line for c in CHUNKS.values() for line in c.lines))
    cls = SYSTEMS[system]
    scorers = [CitationScorer(), NumericScorer(), LengthScorer()]
    (record,) = evaluate([pred], {"t": task}, Corpus({"ACME_q3": doc}), list(CHUNKS.values()),
                         scorers, 50, cls, citations=cites)
    return record


def test_precision_by_figures_coverage_by_valid_ids():
    answer = (f"revenue rose 8% to $452 million. {cite([A])}\n"     # backed by its figures
              f"free cash flow was $90 million. {cite([B])}\n"      # B says $88.6 million
              f"guidance is unchanged. {cite([C])}\n"               # C was never shown
              f"margins held. {cite(['ACME_q3#L99-120'])}\n"        # no such chunk
              "we opened a plant.")                                 # no citation
    r = item_for(answer)
    assert r["citation_coverage"] == 2 / 5
    assert r["citation_precision"] == 1 / 2  # no judge: missing figures are not backed
    by_claim = {c["claim"]: c for c in r["citations"]}
    assert by_claim["revenue rose 8% to $452 million."]["supported"] is True
    assert by_claim["free cash flow was $90 million."]["supported"] is False
    assert by_claim["guidance is unchanged."] == {
        "claim": "guidance is unchanged.", "cited": [C], "valid": [], "supported": None,
        "checked_by": None, "judge_reply": None}
    # every other scorer saw the answer without markers: chunk ids hold no numbers for them
    assert r["word_count"] == len(strip_citations(answer).split())
    assert r["numeric_precision"] == 2 / 3  # 8%, $452 million found; $90 million not


def test_citations_of_chunks_never_shown_are_counted_as_invalid():
    answer = (f"revenue rose 8% to $452 million. {cite([A, 'ACME_q3#L99-120'])}\n"  # 1 of 2 made up
              f"guidance is unchanged. {cite([C])}\n"  # C exists but was never shown
              f"free cash flow was $88.6 million. {cite([B])}")
    r = item_for(answer)
    assert r["citation_invalid_rate"] == 2 / 4
    assert r["citation_coverage"] == 2 / 3  # the made-up id alone does not uncover a claim
    uncited = item_for("revenue rose 8% to $452 million.")
    assert uncited["citation_invalid_rate"] is None
    assert uncited["null_reasons"]["citation_invalid_rate"] == "the answer cites no chunk"


def test_ids_named_in_tool_results_are_valid_and_a_page_number_is_not_a_figure():
    # the agent saw C in a search result; A's header says PAGE: 12, which backs no "12"
    answer = f"guidance is unchanged. {cite([C])}\nrevenue was 12 plants. {cite([A])}"
    task_trace = [ToolCall("semantic_search", {"query": "q"}, [C], False, None, 0.0, 1.0)]
    record = item_for(answer, shown=(A,), system="arag")
    assert record["citation_coverage"] == 0.5  # C was not shown to this prediction
    pred_with_search = item_for_trace(answer, task_trace)
    assert pred_with_search["citation_coverage"] == 1.0
    claims_ = {c["claim"]: c for c in pred_with_search["citations"]}
    assert claims_["revenue was 12 plants."]["supported"] is False
    assert claims_["guidance is unchanged."]["supported"] is None  # no figure, no judge
    assert pred_with_search["citation_unchecked"] == 1.0


def item_for_trace(answer: str, trace: list) -> dict:
    task = Task("t", "summarization", ("ACME_q3",), "q", "r")
    pred = Prediction(id="t", source="s", system="arag", model="m", task_type="summarization",
                      question="q", doc_ids=["ACME_q3"], ground_truth="r", predicted=answer,
                      context_chunk_ids=[A], trace=trace)
    doc = Document("ACME_q3", tuple(line for c in CHUNKS.values() for line in c.lines))
    (record,) = evaluate([pred], {"t": task}, Corpus({"ACME_q3": doc}), list(CHUNKS.values()),
                         [CitationScorer()], 50, SYSTEMS["arag"])
    return record


class SupportJudge(ChatModel):
    """Says a claim is supported when its first word is in the passages."""

    provider = "fake"
    name = "support-judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        claim = prompt.split("Claim:\n", 1)[1].split("\n", 1)[0]
        passages = prompt.split("Claim:\n", 1)[0].lower()
        verdict = "yes" if claim.split()[0].lower() in passages else "no"
        if claim.startswith("unclear"):
            return Completion([{"type": "text", "text": "Hard to say."}], "end_turn",
                              Usage(5, 5), self.name)
        return Completion([{"type": "text", "text": f"Checked.\nSupported: {verdict}"}],
                          "end_turn", Usage(5, 5), self.name)


def test_the_judge_settles_claims_their_figures_cannot():
    judge = SupportJudge()
    task = Task("t", "summarization", ("ACME_q3",), "q", "r")
    answer = (f"revenue rose 8% to $452 million. {cite([A])}\n"  # figures: no judge call
              f"margins held steady. {cite([A])}\n"             # judge: yes
              f"dividends doubled. {cite([B])}\n"               # judge: no
              f"unclear wording. {cite([B])}")                  # judge: no verdict
    pred = Prediction(id="t", source="s", system="naive", model="m", task_type="summarization",
                      question="q", doc_ids=["ACME_q3"], ground_truth="r", predicted=answer,
                      context_chunk_ids=[A, B])
    doc = Document("ACME_q3", tuple(line for c in CHUNKS.values() for line in c.lines))
    (record,) = evaluate([pred], {"t": task}, Corpus({"ACME_q3": doc}), list(CHUNKS.values()),
                         [CitationScorer(judge)], 50, SYSTEMS["naive"])
    assert len(judge.prompts) == 3 and "[COMPANY: ACME" in judge.prompts[0]
    assert record["citation_precision"] == 2 / 3 and record["citation_unchecked"] == 1.0
    checked = [(c["supported"], c["checked_by"]) for c in record["citations"]]
    assert checked == [(True, "figures"), (True, "judge"), (False, "judge"), (None, None)]
    assert record["citations"][3]["judge_reply"] == "Hard to say."
    assert parse_supported("**Supported:** Yes") is True and parse_supported("maybe") is None


def test_runs_that_ask_for_no_citations_get_nulls_with_the_reason():
    r = item_for(f"revenue rose 8%. {cite([A])}", system="stuffing")
    assert r["citation_precision"] is None and "asked for no citations" in \
        r["null_reasons"]["citation_precision"]
    r = item_for(f"revenue rose 8%. {cite([A])}", cites=False)
    assert r["citation_coverage"] is None and "system.citations=false" in \
        r["null_reasons"]["citation_coverage"]
    assert item_for("")["null_reasons"]["citation_coverage"] == "empty prediction"


def test_the_offline_model_cites_each_sentence_with_its_chunk_when_asked():
    prompt = (f'<chunk id="{A}">\n[COMPANY: ACME]\nRevenue rose 8% to $452 million.\n</chunk>\n'
              f'<chunk id="{B}">\n[COMPANY: ACME]\nFree cash flow was $88.6 million.\n</chunk>\n'
              "<question>Summarize Q3.</question>\n<style>earnings_call</style>\n"
              "<target_words>40</target_words>\n")
    model = OfflineModel()
    plain = model.complete("s", [{"role": "user", "content": prompt}]).text
    cited = model.complete("s", [{"role": "user", "content": prompt
                                  + "Cite as <cite_format>[c:CHUNK_ID]</cite_format>."}]).text
    assert "[c:" not in plain and strip_citations(cited) == plain
    assert claims(cited) == [Claim("revenue rose 8% to $452 million.", (A,)),
                             Claim("free cash flow was $88.6 million.", (B,))]
