"""The agent's path against gold evidence (metrics.trajectory): planted foreign traces on
ECTSum val with known answers, the built-in offline agent, a loop-budget sweep, and the
systems that have no path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.datasets import load_dataset
from arag.records import Prediction, Task
from arag.retrieval import build_chunks
from arag.systems import SYSTEMS
from arag.systems.predictions_file import read_predictions
from arag.trace import ToolCall
from metrics.base import ScoringItem
from metrics.trajectory import BUDGET_UNKNOWN, NO_GOLD, NO_PATH, TrajectoryScorer, judge_agreement
from runners.evaluate import evaluate
from tests.conftest import ROOT, SHARED, all_runs, client_for, compose_cfg, run_cli

ECTSUM = SHARED / "ectsum"
needs_data = pytest.mark.skipif(not (ECTSUM / "data" / "final" / "val").is_dir(),
                                reason=f"../shared/datasets not present: {ECTSUM}")
TASK, OTHER = "ABT_q3_2021", "ABM_q1_2021"  # gold lines of ABT_q3_2021: 19, 22, 48


@pytest.fixture(scope="module")
def val():
    if not (ECTSUM / "data" / "final" / "val").is_dir():
        pytest.skip(f"../shared/datasets not present: {ECTSUM}")
    cfg = compose_cfg(["dataset=ectsum", f"dataset.root={ECTSUM}", "dataset.split=val",
                       "dataset.limit=3"])
    ds = load_dataset(cfg.dataset, ROOT)
    return ds, build_chunks(ds.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)


def text(ds, doc: str, *lines: int) -> str:
    return " ".join(ds.corpus.documents[doc].lines[n - 1] for n in lines)


def hit(body: str) -> dict:
    return {"chunk_id": "their-id", "preview": body[:70] + "..."}


def read(*bodies: str) -> dict:
    return {"results": [{"chunk_id": "their-id", "text": b} for b in bodies]}


def planted(ds) -> list[dict]:
    """The public A-RAG project's shape: ``{loop, tool, input, output: {"results": [...]}}``."""
    return [
        {"loop": 1, "tool": "semantic_search", "input": {"query": "testing sales"},
         "output": {"results": [hit(text(ds, TASK, 2)), hit(text(ds, OTHER, 10)),
                                hit(text(ds, TASK, 48)),
                                {"chunk_id": "x", "snippet": "A sentence no transcript holds."}]}},
        {"loop": 2, "tool": "chunk_read", "input": {"chunk_ids": ["a"]},
         "output": read(text(ds, OTHER, 10, 11, 12))},  # another company's transcript
        {"loop": 3, "tool": "chunk_read", "input": {"chunk_ids": ["b"]},
         "output": read(text(ds, TASK, 18, 19))},  # first gold (line 19) at step 3
        {"loop": 4, "tool": "chunk_read", "input": {"chunk_ids": ["b"]},
         "output": read(text(ds, TASK, 18, 19))},  # the same text again
        {"loop": 5, "tool": "chunk_read", "input": {"chunk_ids": ["c"]},
         "output": read(text(ds, TASK, 21, 22))},  # the last new gold (line 22)
        {"loop": 6, "tool": "chunk_read", "input": {"chunk_ids": ["d", "e"]},
         "output": read(text(ds, TASK, 1), text(ds, TASK, 30, 31))},  # two reads after it
        {"loop": 7, "tool": "keyword_search", "input": {"keywords": ["guidance"]},
         "output": "3 hits: d (Factors...), e, f"},  # a listing: unlocated
        {"loop": 8, "tool": "answer", "output": "Abbott sold 225 million COVID tests."},
    ]


def score_file(ds, chunks, tmp_path: Path, records: list[dict]) -> list[dict]:
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    file = read_predictions(path, ds.tasks, ds.corpus, chunks, allow_missing=True)
    preds = list(file.predictions.values())
    return evaluate(preds, {t.id: t for t in ds.tasks}, ds.corpus, chunks, [TrajectoryScorer()],
                    45, SYSTEMS.get("external"))


def test_a_planted_foreign_trace_on_ectsum_val_gets_every_measure_exactly(val, tmp_path):
    ds, chunks = val
    (r,) = score_file(ds, chunks, tmp_path, [{"id": TASK, "predicted": "Abbott sold tests.",
                                              "max_loops_reached": False,
                                              "trace": planted(ds)}])
    assert r["trajectory_steps"] == 7  # the answer is not a step
    assert r["trajectory_reads"] == 6
    assert r["trajectory_redundant_read_rate"] == pytest.approx(1 / 6)
    assert r["trajectory_off_document_read_rate"] == pytest.approx(1 / 6)
    assert r["trajectory_off_document_result_rate"] == pytest.approx(1 / 3)  # of 3 located
    assert r["trajectory_unlocated_results"] == 1 and r["trajectory_unlocated_reads"] == 0
    assert r["trajectory_unlocated_steps"] == 1  # the keyword listing
    assert r["trajectory_steps_to_first_gold"] == 3
    assert r["trajectory_gold_recall_at_stop"] == pytest.approx(2 / 3)
    assert r["trajectory_seen_unread_gold"] == 1  # line 48: in a hit, never read
    assert r["trajectory_reads_after_last_new_gold"] == 2
    assert r["trajectory_p"] == 1.0 and r["trajectory_ir"] == 1.0
    assert r["trajectory_codes"] == ["P", "IR"]
    assert r["trajectory_gold_recall_by_step"] == pytest.approx(
        [0, 0, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3])


def test_p_needs_budget_left_and_unknown_budget_is_null_with_the_reason(val, tmp_path):
    ds, chunks = val
    base = {"id": TASK, "predicted": "Abbott sold tests.", "trace": planted(ds)}
    (spent,), (roomy,), (unsaid,) = (
        score_file(ds, chunks, tmp_path, [{**base, **extra}])
        for extra in ({"max_loops": 7}, {"max_loops": 20}, {}))
    assert spent["trajectory_p"] == 0.0  # its 7 steps used the 7 loops it had
    assert spent["trajectory_codes"] == ["IR"]
    assert roomy["trajectory_p"] == 1.0
    assert unsaid["trajectory_p"] is None
    assert unsaid["null_reasons"]["trajectory_p"] == BUDGET_UNKNOWN
    assert unsaid["trajectory_codes"] is None and unsaid["trajectory_ir"] == 1.0


def test_the_same_reads_answering_another_task_are_off_its_document(val, tmp_path):
    ds, chunks = val
    (r,) = score_file(ds, chunks, tmp_path, [{"id": OTHER, "predicted": "ABM grew.",
                                              "trace": planted(ds)}])
    assert r["trajectory_off_document_read_rate"] == pytest.approx(5 / 6)
    assert r["trajectory_off_document_result_rate"] == pytest.approx(2 / 3)
    assert r["trajectory_gold_recall_at_stop"] == 0.0 and r["trajectory_p"] == 0.0


def test_a_read_that_cannot_be_located_is_counted_never_called_on_or_off(val, tmp_path):
    ds, chunks = val
    (r,) = score_file(ds, chunks, tmp_path, [{"id": TASK, "predicted": "x y z",
                                              "max_loops_reached": True, "trace": [
        {"loop": 1, "tool": "chunk_read", "input": {}, "output": "Error: no chunk c-9"},
        {"loop": 2, "tool": "chunk_read", "input": {}, "output": read(text(ds, TASK, 19))}]}])
    assert r["trajectory_reads"] == 2 and r["trajectory_unlocated_reads"] == 1
    assert r["trajectory_off_document_read_rate"] == 0.0  # of the one located
    assert r["trajectory_ir"] is None and "could not be located" in r["null_reasons"][
        "trajectory_ir"]
    assert r["trajectory_steps_to_first_gold"] == 2


def test_the_older_trace_shapes_are_read_too():
    """tests/fixtures/aragpoc_trace.jsonl: action/tool_name/function, output/result/
    observation, lists of texts or objects; a plain-string search listing is unlocated."""
    from tests.test_attribution import CHUNKS, CORPUS, FIXTURES, GOLD, REF

    task = Task("t1", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    file = read_predictions(FIXTURES / "aragpoc_trace.jsonl", [task], CORPUS, CHUNKS, False)
    (r,) = evaluate(list(file.predictions.values()), {"t1": task}, CORPUS, CHUNKS,
                    [TrajectoryScorer()], 50, SYSTEMS.get("external"))
    assert r["trajectory_steps"] == 5 and r["trajectory_reads"] == 4
    assert r["trajectory_unlocated_steps"] == 1 and r["trajectory_steps_to_first_gold"] == 3
    assert r["trajectory_gold_recall_at_stop"] == 1.0 and r["trajectory_ir"] == 0.0
    # its budget is not said, but no gold it saw went unread: not P, whatever the budget
    assert r["trajectory_p"] == 0.0


def _built_in(calls: list[ToolCall], **fields) -> ScoringItem:
    from tests.test_attribution import CHUNKS, GOLD, REF

    task = Task("t", "summarization", ("D",), "Summarize.", REF, gold_lines={"D": GOLD})
    pred = Prediction(id="t", source="s", system="arag", model="m", task_type="summarization",
                      question="q", doc_ids=["D"], ground_truth=REF, predicted="an answer",
                      trace=calls, **fields)
    return ScoringItem(pred, task, None, "", 50, True, agentic=True,
                       chunks={c.chunk_id: c for c in CHUNKS})


def _call(name: str, ids: list[str], asked: list[str] | None = None) -> ToolCall:
    return ToolCall(name, {"chunk_ids": asked or ids}, ids, False, None, 0.0, 0.0)


@pytest.mark.parametrize("fields,flagged", [({}, 1.0), ({"max_loops_reached": True}, 0.0),
                                            ({"context_budget_reached": True}, 0.0)])
def test_the_built_in_agents_p_needs_loops_and_context_left(fields, flagged):
    """Gold seen in a hit (lines 3-4's chunk) and never read: P only with budget left; a
    chunk asked for again (the tool returns a marker) is a redundant read."""
    from tests.test_attribution import chunks_of

    gold, other = chunks_of(3)[0], chunks_of(20)[0]
    item = _built_in([_call("semantic_search", [gold, other]), _call("chunk_read", [other]),
                      _call("chunk_read", [], asked=[other])], **fields)
    (s,) = TrajectoryScorer().score([item])
    assert s.values["trajectory_p"] == flagged
    assert s.values["trajectory_reads"] == 2 and s.values["trajectory_redundant_read_rate"] == 0.5
    assert s.values["trajectory_steps_to_first_gold"] is None
    assert s.null_reasons["trajectory_steps_to_first_gold"] == "the path never read gold evidence"


def test_the_mechanical_codes_agree_with_the_judges_where_both_are_known():
    records = [{"error_codes": ["P"], "trajectory_p": 1.0, "trajectory_ir": 0.0},
               {"error_codes": [], "trajectory_p": 1.0, "trajectory_ir": 0.0},
               {"error_codes": None, "trajectory_p": 1.0, "trajectory_ir": 1.0},
               {"error_codes": ["IR"], "trajectory_p": None, "trajectory_ir": 1.0}]
    m = judge_agreement(records)
    assert m["trajectory_judge_agreement_P"] == 0.5 and m["trajectory_judge_agreement_P_n"] == 2
    assert m["trajectory_judge_agreement_IR"] == 1.0 and m["trajectory_judge_agreement_IR_n"] == 3
    assert judge_agreement([{"error_codes": None, "trajectory_p": 1.0}]) == {}


def test_a_task_without_gold_has_null_gold_measures_and_its_path_still_counted():
    from tests.test_attribution import chunks_of

    item = _built_in([_call("chunk_read", chunks_of(3))])
    item.task = Task("t", "summarization", ("D",), "Summarize.", "ref", gold_lines=None)
    (s,) = TrajectoryScorer().score([item])
    assert s.values["trajectory_reads"] == 1 and s.values["trajectory_ir"] == 0.0
    for f in ("trajectory_gold_recall_at_stop", "trajectory_steps_to_first_gold",
              "trajectory_seen_unread_gold", "trajectory_p"):
        assert s.values[f] is None and s.null_reasons[f] == NO_GOLD


# --- the built-in offline agent, end to end ------------------------------------------------

def offline_records(make_cfg, *overrides: str) -> list[dict]:
    """Offline predictions of ECTSum val's first tasks, scored with the trajectory scorer."""
    from arag.llm import make_model
    from runners.job import build_system, prepare
    from runners.settings import read

    cfg = make_cfg("dataset=ectsum", f"dataset.root={ECTSUM}", "dataset.split=val",
                   "dataset.limit=3", "metrics.scorers=[retrieval,trajectory]", *overrides)
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    predictions = [system.predict(task, "ectsum") for task in job.dataset.tasks]
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    return evaluate(predictions, {t.id: t for t in job.dataset.tasks}, job.dataset.corpus, chunks,
                    [TrajectoryScorer()], cfg.target_length, job.system_class)


MEASURES = ("trajectory_steps", "trajectory_reads", "trajectory_redundant_read_rate",
            "trajectory_off_document_read_rate", "trajectory_off_document_result_rate",
            "trajectory_steps_to_first_gold", "trajectory_gold_recall_at_stop",
            "trajectory_seen_unread_gold", "trajectory_reads_after_last_new_gold",
            "trajectory_p", "trajectory_ir", "trajectory_unlocated_steps")


@pytest.mark.slow
@needs_data
def test_the_offline_agent_on_ectsum_val_gets_every_measure_under_both_scopes(make_cfg):
    document = offline_records(make_cfg, "system=arag")
    corpus = offline_records(make_cfg, "system=arag", "retrieval.scope=corpus")
    for records in (document, corpus):
        for r in records:
            assert r["trajectory_steps"] >= 2 and r["trajectory_reads"] >= 1
            assert r["trajectory_gold_recall_at_stop"] is not None
            assert r["trajectory_unlocated_steps"] == 0
            assert isinstance(r["trajectory_codes"], list)
            # every measure is a number or null with its reason
            assert all(r[f] is not None or r["null_reasons"].get(f) for f in MEASURES)
    # under scope=document the tools see only the task's documents: 0 by construction
    assert all(r["trajectory_off_document_result_rate"] == 0.0 for r in document)
    assert all(r["trajectory_off_document_read_rate"] == 0.0 for r in document)
    assert any(r["trajectory_off_document_result_rate"] > 0 for r in corpus)


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("system", ["naive", "stuffing"])
def test_naive_and_stuffing_have_no_path_and_say_so(make_cfg, system):
    for r in offline_records(make_cfg, f"system={system}", "dataset.limit=1"):
        for f in (*MEASURES, "trajectory_codes", "trajectory_gold_recall_by_step"):
            assert r[f] is None and r["null_reasons"][f] == NO_PATH


def test_trajectory_jsonl_has_a_row_per_task_with_or_without_a_path():
    from tests.test_attribution import chunks_of

    scorer = TrajectoryScorer()
    pathless = _built_in([])
    pathless.agentic = False
    scorer.score([_built_in([_call("chunk_read", chunks_of(3))]), pathless])
    rows = [json.loads(line) for line in scorer.artifacts()["trajectory.jsonl"].splitlines()]
    assert [len(r["steps"] or []) for r in rows] == [1, 0] and rows[1]["steps"] is None
    assert rows[0]["steps"][0]["items"][0]["gold"] is True
    assert rows[1]["null_reasons"]["trajectory_steps"] == NO_PATH


@pytest.mark.slow
@needs_data
def test_a_loop_budget_sweep_logs_every_measure_and_gold_recall_does_not_fall(tmp_path):
    """max_loops=2,4,8,16 on two ECTSum val tasks; the offline agent may read up to 16 chunks
    (its read limit raised with the context budget), so the curve can move."""
    budgets = (2, 4, 8, 16)
    result = run_cli(tmp_path, "system=arag", "dataset=ectsum", f"dataset.root={ECTSUM}",
                     "dataset.split=val", "dataset.limit=2", "retrieval.context_budget=16",
                     "model.offline.max_chunks_read=16", "judge=none",
                     "metrics.scorers=[retrieval,trajectory]",
                     f"max_loops={','.join(map(str, budgets))}")
    assert result.returncode == 0, result.stderr[-3000:]
    client = client_for(tmp_path)
    runs = {int(r.data.params["max_loops"]): r for r in all_runs(tmp_path)
            if "max_loops" in r.data.params and r.data.tags.get("system") == "arag"}
    assert sorted(runs) == list(budgets)
    recall = []
    for budget in budgets:
        run = runs[budget]
        for f in ("trajectory_steps", "trajectory_reads", "trajectory_redundant_read_rate",
                  "trajectory_off_document_read_rate", "trajectory_off_document_result_rate",
                  "trajectory_gold_recall_at_stop", "trajectory_seen_unread_gold",
                  "trajectory_p", "trajectory_ir", "trajectory_unlocated_steps"):
            assert f"{f}_mean" in run.data.metrics, (budget, f)
        recall.append(run.data.metrics["trajectory_gold_recall_at_stop_mean"])
        rows = [json.loads(line) for line in Path(client.download_artifacts(
            run.info.run_id, "trajectory.jsonl", str(tmp_path / f"dl{budget}"))).read_text(
            ).splitlines()]
        assert len(rows) == 2 and all(len(r["steps"]) == r["trajectory_steps"] for r in rows)
        assert all("gold_recall" in s for r in rows for s in r["steps"])
    assert recall == sorted(recall) and recall[-1] > recall[0]


# --- the report: "why it loses", the per-budget curves, compare.html ------------------------

def _record(task: str, recall_by_step: list[float], **fields) -> dict:
    base = {"id": task, "trajectory_steps": float(len(recall_by_step)),
            "trajectory_reads": 4.0, "trajectory_off_document_result_rate": 0.8,
            "trajectory_off_document_read_rate": 0.25, "trajectory_redundant_read_rate": 0.0,
            "trajectory_steps_to_first_gold": 3.0, "trajectory_reads_after_last_new_gold": 1.0,
            "trajectory_gold_recall_at_stop": recall_by_step[-1], "trajectory_p": 0.0,
            "trajectory_ir": 1.0, "trajectory_seen_unread_gold": 0.0,
            "trajectory_gold_recall_by_step": recall_by_step, "trajectory_codes": ["IR"],
            "null_reasons": {}}
    return {**base, **fields}


def _inputs(runs: dict[str, tuple[int | None, list[dict]]], agentic: bool = True):
    from types import SimpleNamespace

    finished = [{"run": name, "run_id": name, "system": "arag", "agentic": agentic,
                 "max_loops": budget} for name, (budget, _) in runs.items()]
    return SimpleNamespace(finished=finished, records={n: r for n, (_, r) in runs.items()})


def test_why_it_loses_names_the_main_path_problem_with_its_figures(tmp_path):
    from report.analyses.trajectory import analysis, path_cells
    from report.writers.words import say

    records = [_record("a", [0, 0, 0.5, 1.0]), _record("b", [0, 0.5, 0.5, 0.5],
                                                       trajectory_steps_to_first_gold=2.0)]
    out = analysis(_inputs({"arag": (None, records)}))
    (claim,) = out.claims
    assert claim.kind == "path" and claim.runs == ("arag",) and claim.n_tasks == 2
    assert claim.figures["problem"] == "off_document"
    assert claim.figures["hits_off"] == pytest.approx(0.8)
    assert claim.figures["reads_off"] == pytest.approx(0.25)
    assert claim.figures["first_gold_median"] == 2.5
    assert claim.figures["over_search"] == pytest.approx(2 / 8)
    assert say(claim).startswith("**arag**: main path problem reading other documents")
    (plot,) = out.plots
    drawn = plot(tmp_path)
    assert drawn is not None and drawn.name == "trajectory_arag.png" and drawn.stat().st_size
    cells = dict((label, value) for label, value, _ in path_cells(records[0]))
    assert cells["steps"] == 4 and cells["first gold read at step"] == 3
    assert path_cells({"trajectory_steps": None}) == []


def test_a_loop_budget_sweep_says_where_gold_recall_stops_rising():
    from report.analyses.trajectory import analysis

    runs = {f"arag max_loops={b}": (b, [_record("a", curve)]) for b, curve in (
        (2, [0, 0.2]), (4, [0, 0.2, 0.4, 0.6]), (8, [0, 0.2, 0.4, 0.6, 0.6, 0.6]),
        (16, [0, 0.2, 0.4, 0.6, 0.6, 0.6, 0.6]))}
    out = analysis(_inputs(runs))
    (budget,) = [c for c in out.claims if c.kind == "path_budget"]
    assert budget.figures["budgets"] == [2, 4, 8, 16]
    assert budget.figures["recall"] == pytest.approx([0.2, 0.6, 0.6, 0.6])
    assert budget.figures["plateau"] == 4
    assert len(out.plots) == 1  # one plot for the system, a curve per budget


def test_non_agentic_runs_get_no_path_claim_and_unlocated_steps_are_a_note():
    from report.analyses.trajectory import analysis

    assert not analysis(_inputs({"naive": (None, [_record("a", [0.5])])}, agentic=False)).claims
    out = analysis(_inputs({"ext": (None, [_record("a", [0.5], trajectory_unlocated_steps=2.0,
                                                   trajectory_unlocated_results=3.0)])}))
    (note,) = out.notes
    assert note.kind == "path_unlocated" and note.counts["steps"] == 2
    assert note.counts["results"] == 3


def test_the_public_projects_shape_from_its_fixture_without_shared_data():
    """tests/fixtures/arag_public_trace.jsonl: ``{loop, tool, input, output: {"results"}}``
    steps over a two-document corpus (D, the task's; E, another company's), every answer
    known: a read of E, a repeated read, gold first read at step 3, gold (line 12) seen in a
    hit and never read with budget left, two reads after the last new gold."""
    from arag.records import Corpus, Document
    from tests.test_attribution import DOC, FIXTURES

    other = Document("E", tuple(f"Widget {n} sales reached ${n}.5 billion in the northern "
                                "region this quarter." for n in range(1, 11)), company="Other")
    corpus = Corpus({"D": DOC, "E": other})
    chunks = build_chunks(corpus, 30, 0)
    task = Task("t1", "summarization", ("D",), "Summarize.", "ref", gold_lines={"D": (3, 4, 12)})
    file = read_predictions(FIXTURES / "arag_public_trace.jsonl", [task], corpus, chunks, False)
    pred = file.predictions["t1"]
    again = Prediction.from_dict(json.loads(pred.to_json()))  # re-scoring reads the same path
    assert again.foreign_path == pred.foreign_path
    (r,) = evaluate([again], {"t1": task}, corpus, chunks, [TrajectoryScorer()], 50,
                    SYSTEMS.get("external"))
    assert (r["trajectory_steps"], r["trajectory_reads"]) == (7, 6)
    assert r["trajectory_redundant_read_rate"] == pytest.approx(1 / 6)
    assert r["trajectory_off_document_read_rate"] == pytest.approx(1 / 6)
    assert r["trajectory_off_document_result_rate"] == pytest.approx(1 / 3)
    assert r["trajectory_steps_to_first_gold"] == 3
    assert r["trajectory_gold_recall_at_stop"] == pytest.approx(2 / 3)
    assert r["trajectory_seen_unread_gold"] == 1
    assert r["trajectory_reads_after_last_new_gold"] == 2
    assert r["trajectory_unlocated_steps"] == 1 and r["trajectory_unlocated_results"] == 0
    assert r["trajectory_codes"] == ["P", "IR"]
