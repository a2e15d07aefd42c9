"""Every finding as strong as its numbers: a corrected comparison needs shared labels,
attribution credits what an answer says, a cause is named only when it leads, unknown is
never 0, one quantity has one name, a length preference is not a win, a permutation p at
its floor is a bound. Each case is planted; the tests read claims, notes and figures."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from metrics.pairwise import Outcome, Pair, pair_figures
from metrics.stats import p_text, sign_test
from report.analyses import Inputs, attribution
from report.report import build_report
from report.verdict import TaskSets
from tests.conftest import SHARED
from tests.test_report import rec, row
from tracking.human_labels import HumanLabel

DIM = "geval_faithfulness"


# --- PPI needs shared labels -------------------------------------------------------------

def ppi_report(labelled: dict[str, range], n: int = 30, options: dict | None = None,
               judge_error: float = 1.0) -> dict:
    """arag's judge ``judge_error`` points high, naive's exact; people's labels on the
    tasks ``labelled`` names per run."""
    truth = {s: [1 + (k * (3 if s == "arag" else 7)) % 5 for k in range(n)]
             for s in ("arag", "naive")}
    records = {s: [rec(f"t{k}", 3, **{DIM: truth[s][k] + (judge_error if s == "arag" else 0)})
                   for k in range(n)] for s in truth}
    people = [HumanLabel(f"t{k}", s, DIM, truth[s][k], "ann", "file labels.jsonl")
              for s, tasks in labelled.items() for k in tasks]
    _, data = build_report([row("arag"), row("naive")], records, "t", [DIM], labels=people,
                           options=options)
    return data


def test_twelve_labels_per_run_with_two_shared_decide_nothing():
    data = ppi_report({"arag": range(0, 12), "naive": range(10, 22)})
    analysis = data["analysis"]
    assert "arag" in analysis.run_metrics and "naive" in analysis.run_metrics  # 12 each
    (note,) = [n for n in analysis.notes if n.kind == "ppi_too_few_shared"]
    assert note.runs == ("arag", "naive")
    assert (note.counts["shared"], note.counts["min_shared"]) == (2, 10)
    (claim,) = [c for c in analysis.claims if c.kind == "corrected"]
    assert not claim.decisive and not claim.figures["decides"] and claim.figures["shared"] == 2
    assert not data["answer"].startswith("Corrected by your labels")  # the raw answer stands


def test_a_zero_width_corrected_interval_never_decides_whatever_the_setting():
    """The issue's case: the judge gives arag 5 and naive 1 on every task, people agree on
    the two shared tasks: 4.00 [4.00, 4.00]. Even with report.ppi.min_shared=2 it is no
    decision."""
    records = {"arag": [rec(f"t{k}", 3, **{DIM: 5}) for k in range(30)],
               "naive": [rec(f"t{k}", 3, **{DIM: 1}) for k in range(30)]}
    people = [HumanLabel(f"t{k}", s, DIM, 5 if s == "arag" else 1, "ann", "file labels.jsonl")
              for s, tasks in (("arag", range(0, 12)), ("naive", range(10, 22))) for k in tasks]
    _, data = build_report([row("arag"), row("naive")], records, "t", [DIM], labels=people,
                           options={"ppi": {"min_shared": 2}})
    analysis = data["analysis"]
    (claim,) = [c for c in analysis.claims if c.kind == "corrected"]
    assert claim.difference == pytest.approx(4.0) and claim.ci == pytest.approx((4.0, 4.0))
    assert claim.figures["zero_width"] and not claim.decisive
    assert [n.kind for n in analysis.notes if n.kind.startswith("ppi_")] == ["ppi_zero_width"]
    assert not data["answer"].startswith("Corrected by your labels")


def test_enough_shared_labels_decide_with_the_setting_read_from_the_report_node():
    data = ppi_report({"arag": range(0, 12), "naive": range(0, 12)})
    (claim,) = [c for c in data["analysis"].claims if c.kind == "corrected"]
    assert claim.decisive and claim.figures["shared"] == 12
    stricter = ppi_report({"arag": range(0, 12), "naive": range(0, 12)},
                          options={"ppi": {"min_shared": 20}})
    (held,) = [c for c in stricter["analysis"].claims if c.kind == "corrected"]
    assert not held.decisive and held.figures["min_shared"] == 20


def test_every_task_labelled_says_why_there_is_no_correction():
    data = ppi_report({"arag": range(30), "naive": range(0, 12)})
    (note,) = [n for n in data["analysis"].notes if n.kind == "ppi_all_labelled"]
    assert note.runs == ("arag",) and note.counts["labelled"] == 30
    assert "arag" not in data["analysis"].run_metrics


def test_min_shared_is_a_typed_setting(make_cfg):
    assert make_cfg().report.ppi.min_shared == 10
    assert make_cfg("report.ppi.min_shared=4").report.ppi.min_shared == 4
    with pytest.raises(Exception, match="min_shared"):
        make_cfg("report.ppi.min_shared=many")


# --- attribution credits what an answer says (ECTSum val) --------------------------------

ECTSUM = SHARED / "ectsum"
FIXTURE = Path(__file__).parent / "fixtures" / "ectsum_val_restated.jsonl"


@pytest.fixture(scope="module")
def ectsum_val():
    if not (ECTSUM / "data" / "final" / "val").is_dir():
        pytest.skip(f"ECTSum val is not at {ECTSUM} (../shared/datasets beside the project)")
    from arag.datasets.base import load_dataset

    cfg = SimpleNamespace(adapter="ectsum", name="ectsum", root=str(ECTSUM), split="val",
                          limit=None, options={})
    return load_dataset(cfg, Path(__file__).resolve().parents[1])


def scored_with(dataset, answers: dict[str, str]) -> list[dict]:
    from arag.records import Prediction
    from arag.retrieval import build_chunks
    from arag.systems import SYSTEMS
    from metrics.attribution import AttributionScorer
    from runners.evaluate import evaluate

    preds = [Prediction(id=t.id, source="s", system="stuffing", model="m",
                        task_type="summarization", question=t.question,
                        doc_ids=list(t.doc_ids), ground_truth=t.reference,
                        predicted=answers[t.id]) for t in dataset.tasks]
    return evaluate(preds, {t.id: t for t in dataset.tasks}, dataset.corpus,
                    build_chunks(dataset.corpus, 120, 0), [AttributionScorer()], 45,
                    SYSTEMS.get("stuffing"))


def test_the_reference_as_the_answer_covers_its_gold_facts_on_all_of_ectsum_val(ectsum_val):
    tasks = ectsum_val.tasks
    assert len(tasks) == 249
    records = scored_with(ectsum_val, {t.id: t.reference for t in tasks})
    statuses = Counter(f["status"] for r in records for f in r["attribution_facts"])
    facts = sum(statuses.values())
    key_sentences = sum(len(lines) for t in tasks for lines in t.gold_lines.values())
    assert statuses["covered"] / facts >= 0.9
    # the gold lines the reference leaves out are counted, not charged
    assert facts + sum(r["attribution_unrestated"] for r in records) == key_sentences
    assert facts / key_sentences > 0.7  # most key sentences are restated (hand labels: 73%)


def altered(reference: str, fact: str) -> str:
    """The reference with every number that states one of the fact's figures changed."""
    from metrics.numeric import NUMBER, quantities

    figures = quantities(fact)

    def change(m: re.Match) -> str:
        if not any(q.matches(f) for q in quantities(m.group(0)) for f in figures):
            return m.group(0)
        num = m.group("num").replace(",", "")
        decimals = len(num.split(".")[1]) if "." in num else 0
        return m.group(0).replace(m.group("num"), f"{float(num) * 1.37 + 1:.{decimals}f}")

    return NUMBER.sub(change, reference)


def test_an_answer_missing_a_fact_by_construction_misses_it(ectsum_val):
    """Each gold fact with figures against the reference whose numbers for it are changed,
    and every gold fact against the next call's reference (another company's)."""
    from metrics.attribution import _figures, reflected

    tasks = ectsum_val.tasks
    records = scored_with(ectsum_val, {t.id: t.reference for t in tasks})
    facts = [(k, f["text"]) for k, r in enumerate(records) for f in r["attribution_facts"]]
    with_figures = [(k, text) for k, text in facts if _figures(text)]
    kept = sum(reflected(text, altered(tasks[k].reference, text)) for k, text in with_figures)
    assert len(with_figures) > 500 and kept / len(with_figures) <= 0.02
    other = sum(reflected(text, tasks[(k + 1) % len(tasks)].reference) for k, text in facts)
    assert other / len(facts) <= 0.03


def test_the_match_rule_agrees_with_the_hand_labels(ectsum_val):
    """100 (key sentence, reference) pairs of ECTSum val, labelled by reading each pair."""
    from metrics.attribution import reflected

    tasks = {t.id: t for t in ectsum_val.tasks}
    labels = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert len(labels) == 100
    agree = 0
    for label in labels:
        task = tasks[label["task_id"]]
        (doc_id,) = task.doc_ids
        sentence = ectsum_val.corpus.documents[doc_id].lines[label["line"] - 1]
        assert label["line"] in task.gold_lines[doc_id]
        agree += reflected(sentence, task.reference) == label["restated"]
    assert agree >= 90


def test_a_lower_case_reuters_bullet_covers_the_transcripts_wording():
    from metrics.attribution import reflected

    fact = ("Revenue for the third quarter increased 2.5% to $452.2 million, driven by "
            "higher volumes.")
    assert reflected(fact, "q3 eps $1.10.\nq3 revenue rose 2.5 percent to $452.2 million.")
    assert not reflected(fact, "q3 revenue rose 3.5 percent to $552.2 million.")
    # a specific figure with no word of the fact beside it is another fact
    assert not reflected(fact, "sees fy capital plan of $452.2 million to $500 million.")
    assert not reflected("Net income was $4.7 billion.", "sees 2022 capital plan of $4.3 "
                         "to $4.7 billion.")


# --- a cause is named only when it leads -------------------------------------------------

def fact_records(per_task: list[tuple[int, int]], in_context: bool | None = True) -> list[dict]:
    """One record per task with (not retrieved, retrieved but unused) missed facts."""
    out = []
    def fact(text: str, status: str, read: bool | None) -> dict:
        return {"text": text, "status": status, "in_context": read, "chunk_id": None}

    for k, (missing, unused) in enumerate(per_task):
        facts = ([fact("x", "not_retrieved", False)] * missing
                 + [fact("y", "retrieved_unused", True)] * unused
                 + [fact("z", "covered", in_context)])
        if in_context is None:
            facts = [dict(f, status="unknown" if f["status"] != "covered" else "covered",
                          in_context=None) for f in facts]
        out.append({"id": f"t{k}", "attribution_method": "text_match",
                    "attribution_facts": facts,
                    "attribution_claims": [{"text": "c", "status": "unsupported", "chunk_id": None}] * (k % 2)
                    + [{"text": "d", "status": "supported", "chunk_id": None}],
                    "attribution_unsupported_rate": (k % 2) / (1 + k % 2)})
    return out


def analysed(records: list[dict]):
    run = {"run": "naive", "run_id": "n"}
    return attribution.analysis(Inputs([run], [run], {"n": records},
                                       TaskSets([run], [], {}, [r["id"] for r in records]),
                                       [], []))


def test_a_341_vs_328_split_names_no_main_cause():
    split = [(2, 1)] * 118 + [(1, 2)] * 105  # 341 never retrieved, 328 unused
    (cause,) = [c for c in analysed(fact_records(split)).claims if c.kind == "cause"]
    assert (cause.figures["not_retrieved"], cause.figures["retrieved_unused"]) == (341, 328)
    assert cause.figures["cause"] is None and cause.figures["share_of_missed"] is None
    assert cause.p > 0.05 and cause.n_tasks == 223 and cause.key


def test_a_cause_that_leads_on_most_tasks_is_named_with_its_test():
    lead = [(2, 1)] * 150 + [(1, 2)] * 73
    (cause,) = [c for c in analysed(fact_records(lead)).claims if c.kind == "cause"]
    assert cause.figures["cause"] == "not_retrieved" and cause.p < 0.05
    assert cause.figures["share_of_missed"] == pytest.approx(373 / 669)
    test = sign_test([2] * 150 + [1] * 73, [1] * 150 + [2] * 73)
    from scipy.stats import binomtest
    assert test.p == pytest.approx(binomtest(150, 223).pvalue) and test.leader == 0


def test_the_unsupported_share_is_given_pooled_and_per_task_each_named():
    records = fact_records([(1, 0)] * 10)
    (cause,) = [c for c in analysed(records).claims if c.kind == "cause"]
    # 5 unsupported of 15 checked claims pooled; the mean per task of 0 and 0.5 is 0.25
    assert cause.figures["unsupported_pooled"] == pytest.approx(5 / 15)
    assert cause.figures["unsupported_mean_per_task"] == pytest.approx(0.25)
    assert (cause.figures["claims_unsupported"], cause.figures["claims_checked"]) == (5, 15)


# --- unknown is unknown --------------------------------------------------------------------

def test_a_run_with_no_known_context_shows_unknown_in_its_table():
    found = analysed(fact_records([(2, 1)] * 4, in_context=None))
    (table,) = [c.table for c in found.claims if c.kind == "attribution_table"]
    header, (line,) = list(table.header), table.rows
    cells = dict(zip(header, line, strict=True))
    assert cells["retrieved, unused"] is None and cells["not retrieved"] is None  # not 0
    assert cells["unknown"] == 12 and cells["covered"] == 4
    from report.writers.markdown import section_of
    shown = next(line for line in section_of(found.claims).splitlines()
                 if line.startswith("| naive"))
    assert shown.split(" | ")[3:5] == ["unknown", "unknown"]
    assert not [c for c in found.claims if c.kind == "cause"]  # no cause to name
    (note,) = [n for n in found.notes if n.kind == "attribution_unknown"]
    assert note.counts == {"unknown": 12, "context_unknown": True}


# --- pairwise: ties ½ in both rates, a length preference is not a win -------------------

def longer_wins(n: int = 40) -> list[Outcome]:
    """A judge that always prefers the longer answer (a tie at equal length): arag is the
    longer on 28 tasks, naive on 8, equal on 4."""
    pair = Pair("arag", "naive")
    out = []
    for i in range(n):
        diff = 30 if i < 28 else -30 if i < 36 else 0
        winner = "arag" if diff > 0 else "naive" if diff < 0 else "tie"
        rows = [{"task_id": f"t{i}", "a_words": 60 + diff, "b_words": 60,
                 "verdict": {"arag": "A", "naive": "B", "tie": "tie"}[winner]}]
        out.append(Outcome("j", pair, "overall", f"t{i}", 0, "decided", winner, rows))
    return out


def test_a_judge_that_always_prefers_the_longer_answer_is_explained_by_length():
    from report.analyses.pairwise import preference
    from report.writers.words import say

    f = pair_figures(longer_wins())
    assert (f.wins, f.ties, f.losses) == (28, 4, 8)
    assert f.win_rate == pytest.approx((28 + 4 / 2) / 40)  # ties ½, as in the LC rate
    assert f.win_rate_ci[0] <= f.win_rate <= f.win_rate_ci[1]
    assert f.sign_test_p < 0.05  # the raw preference alone would be "beats"
    low, high = f.length.ci
    assert low <= 0.5 <= high and low <= f.length.win_rate <= high
    assert f.length_explains
    assert "beats" not in say(preference(f, None, "geval_coverage"))


def test_a_preference_that_survives_length_control_still_beats():
    outcomes = longer_wins()
    pair = outcomes[0].pair
    # the judge prefers arag on six tasks of seven, the longer or not
    flipped = [Outcome(o.judge, pair, o.dimension, o.task_id, 0, "decided",
                       "arag" if k % 7 else "naive", o.rows) for k, o in enumerate(outcomes)]
    f = pair_figures(flipped)
    assert not f.length_explains and f.length.ci[0] > 0.5


# --- a permutation p at its floor is a bound -------------------------------------------------

def test_a_permutation_p_at_its_floor_reads_at_most():
    from metrics.slices import spearman_permutation

    found = spearman_permutation(list(range(30)), [0.1 * k for k in range(30)],
                                 permutations=2000)
    assert found.p == pytest.approx(1 / 2001) and found.floor == pytest.approx(1 / 2001)
    assert p_text(found.p, found.floor).startswith("p ≤")
    assert p_text(0.03, found.floor) == "p = 0.03"


# --- latency over rounds only where latencies were measured ------------------------------

def test_no_latency_line_where_no_latency_was_measured():
    records = {"a": [rec("t0", 4)], "b": [rec("t0", 3)]}
    sequential = {"order_seed": 0, "max_tasks": None}
    text, _ = build_report([row("a", n_resumed=1.0, n_tasks=1.0, sequential=sequential),
                            row("b", sequential=sequential)], records, "t")
    assert "Latency over rounds" not in text and "Latency from an earlier run" not in text


def test_the_mdd_names_the_mean_it_is_computed_on():
    from metrics.stats import difference_quantity, paired_difference

    clustered = paired_difference(np.arange(8.0), np.zeros(8), clusters=[0, 0, 1, 1, 2, 2, 3, 3])
    assert difference_quantity(clustered.n_clusters) == "mean of document means"
    assert difference_quantity(paired_difference([1.0, 2.0], [0.0, 0.0]).n_clusters) == \
        "mean over tasks"
