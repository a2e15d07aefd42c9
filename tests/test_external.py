"""Predictions made outside the harness (``system=external``): a bad file fails before any
run opens with its file, line and field; contexts are located in the dataset or counted
as unlocatable; what a record does not carry is null with the reason, never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from arag.datasets import Dataset
from arag.retrieval import build_chunks
from arag.systems.predictions_file import PredictionsFileError, read_predictions
from metrics.base import NO_CONTEXT, NO_RETRIEVAL
from runners.experiment import run
from runners.job import load_tasks, prepare
from tests.conftest import all_runs, client_for, write_mini_dataset


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    return write_mini_dataset(tmp_path_factory.mktemp("external") / "mini")


@pytest.fixture
def loaded(make_cfg, mini) -> tuple[Dataset, list]:
    cfg = make_cfg(f"dataset.root={mini}")
    dataset = load_tasks(cfg)
    return dataset, build_chunks(dataset.corpus, cfg.retrieval.chunk_size,
                                 cfg.retrieval.chunk_overlap)


def ids(mini: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (mini / "tasks.jsonl").read_text().splitlines()]


def write(path: Path, lines: list[str | dict]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def good(task_id: str, **extra) -> dict:
    return {"id": task_id, "predicted": "Revenue rose 8.0 percent.", **extra}


t0, t1 = "T0X_q3_2024", "T1X_q3_2024"  # the mini dataset's task ids
BAD_FILES = {
    "malformed JSON": (lambda t: [good(t[0]), '{"id": "x", "predicted": '],
                       [":2", "malformed JSON"]),
    "missing id": (lambda t: [{"predicted": "x"}, good(t[1])], [":1 (field 'id')", "missing"]),
    "missing predicted": (lambda t: [good(t[0]), {"id": t[1]}],
                          [":2 (field 'predicted')", "missing required field 'predicted'"]),
    "duplicate ids": (lambda t: [good(t[0]), good(t[1]), good(t[0])],
                      [":3 (field 'id')", f"duplicate id '{t0}' (first on line 1)"]),
    "ids not in the dataset": (lambda t: [good(t[0]), good(t[1]), good("NOPE_q1"),
                                          good("ALSO_NOT")],
                               ["2 id(s) are not tasks of the dataset: 'NOPE_q1' (line 3), "
                                "'ALSO_NOT' (line 4)"]),
    "tasks missing from the file": (lambda t: [good(t[0])],
                                    [f"1 task(s) of the dataset have no record: {t1}",
                                     "system.allow_missing=true"]),
    "cost not a number": (lambda t: [good(t[0]), good(t[1], cost_usd="0.002")],
                          [":2 (field 'cost_usd')", "must be a non-negative number"]),
    "chunk ids not of the index": (lambda t: [good(t[0], retrieved_chunk_ids=["X#L1-9"]),
                                              good(t[1])],
                                   [":1 (field 'retrieved_chunk_ids')",
                                    "not chunks of this harness's index"]),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_predictions_file_names_its_file_line_and_field(case, loaded, mini, tmp_path):
    dataset, chunks = loaded
    assert ids(mini) == [t0, t1]
    make, expected = BAD_FILES[case]
    path = write(tmp_path / "preds.jsonl", make([t0, t1]))
    with pytest.raises(PredictionsFileError) as err:
        read_predictions(path, dataset.tasks, dataset.corpus, chunks, allow_missing=False)
    message = str(err.value)
    assert message.startswith(str(path))
    for part in expected:
        assert part in message


def test_allow_missing_scores_the_tasks_the_file_has_and_says_how_many(make_cfg, mini,
                                                                       tmp_path):
    path = write(tmp_path / "preds.jsonl", [good(t1)])
    job = prepare(make_cfg(f"dataset.root={mini}", "system=external",
                           f"system.predictions={path}", "system.allow_missing=true"))
    assert [t.id for t in job.dataset.tasks] == [t1]
    assert job.system_class.run_metrics["n_tasks_missing"] == 1
    assert any("1 task(s) of the dataset have no prediction" in n for n in job.system_class.notes)


def test_contexts_are_located_by_lines_by_text_or_counted_as_unlocatable(loaded, tmp_path):
    dataset, chunks = loaded
    doc = dataset.corpus.documents[t0]
    revenue = doc.lines[20]  # gold line 21
    contexts = [
        {"text": "whatever the pipeline kept", "doc_id": t0, "line_start": 41, "line_end": 42},
        f"[T0X | Q3 2024]\n{revenue}\n",  # a bare text holding a whole sentence
        {"text": "earnings per share were $1.10", "doc_id": t0},  # a piece of one sentence
        {"text": "Nothing like this is said on the call at all.", "doc_id": t0},
        {"text": "x", "doc_id": "NOT_A_DOC", "line_start": 1},
        {"text": "x", "doc_id": t0, "line_start": 999},
        {"text": "x", "doc_id": t0, "page": 1},  # a transcript has no pages
    ]
    path = write(tmp_path / "preds.jsonl", [good(t0, contexts=contexts), good(t1)])
    pred = read_predictions(path, dataset.tasks, dataset.corpus, chunks, False).predictions[t0]
    lines = [c["lines"] for c in pred.contexts]
    assert lines[:3] == [[41, 42], [21], [41]]
    assert all(not c["lines"] and not c["chunk_ids"] for c in pred.contexts[3:])
    assert [bool(c["unmapped"]) for c in pred.contexts] == [False] * 3 + [True] * 4
    assert "matches no sentence" in pred.contexts[3]["unmapped"]
    assert "no pages" in pred.contexts[6]["unmapped"]
    holding = {line: next(c.chunk_id for c in chunks if c.doc_id == t0 and c.covers(line))
               for line in (21, 41, 42)}
    # the retrieval is the chunks the located contexts lie in, in the order given
    assert pred.retrieved_chunk_ids == list(dict.fromkeys(
        [holding[41], holding[42], holding[21]]))
    assert pred.not_recorded == list(pred.not_recorded)  # measurements: not in the record
    assert {"cost_usd", "latency_ms", "loops"} <= set(pred.not_recorded)
    assert pred.cost_usd is None and pred.latency_ms is None


def test_a_record_without_contexts_declares_no_retrieval(make_cfg, mini, tmp_path):
    path = write(tmp_path / "preds.jsonl", [good(t0, cost_usd=0.01), good(t1, cost_usd=0.02)])
    job = prepare(make_cfg(f"dataset.root={mini}", "system=external",
                           f"system.predictions={path}"))
    cls = job.system_class
    assert not cls.retrieves and not cls.ranks
    assert any("judged against the task's whole documents" in n for n in cls.notes)


def test_an_edited_predictions_file_is_a_new_run(make_cfg, mini, tmp_path):
    path = write(tmp_path / "preds.jsonl", [good(t0), good(t1)])
    first = prepare(make_cfg(f"dataset.root={mini}", "system=external",
                             f"system.predictions={path}"))
    write(path, [good(t0), good(t1, predicted="Revenue fell.")])
    second = prepare(make_cfg(f"dataset.root={mini}", "system=external",
                              f"system.predictions={path}"))
    assert first.config_hash != second.config_hash
    assert first.predictions_path != second.predictions_path


def test_evaluate_of_records_without_retrieval_or_context_gives_nulls_not_zeros(
        make_cfg, mini, tmp_path):
    """A run uploaded by hand (a naive config and predictions that carry no chunk ids, no
    context and no cost) re-scored with mode=evaluate: retrieval, ranking, context and
    numeric precision are null with the reason, cost and latency null, none of them 0."""
    cfg = make_cfg(f"dataset.root={mini}", "system=naive",
                   "metrics.scorers=[rouge,retrieval,ranking,context,numeric,length]")
    client = client_for(tmp_path)
    experiment = client.create_experiment("uploaded")
    source = client.create_run(experiment, run_name="their pipeline")
    dataset = load_tasks(cfg)
    records = [{"id": t.id, "source": "mini", "system": "naive", "model": "theirs",
                "task_type": t.task_type, "question": t.question, "doc_ids": list(t.doc_ids),
                "ground_truth": t.reference, "predicted": t.reference}
               for t in dataset.tasks]
    client.log_text(source.info.run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
    client.log_text(source.info.run_id, "".join(json.dumps(r) + "\n" for r in records),
                    "predictions.jsonl")
    client.set_terminated(source.info.run_id)

    metrics = run(make_cfg(f"dataset.root={mini}", "mode=evaluate",
                           f"source_run_id={source.info.run_id}",
                           "metrics.scorers=[rouge,retrieval,ranking,context,numeric,length]"))
    for absent in ("retrieval_recall_mean", "retrieval_precision_mean", "recall_at_5_mean",
                   "context_chunks_mean", "context_tokens_mean", "numeric_precision_mean",
                   "cost_usd_total", "cost_usd_mean", "latency_ms_p50", "loops_mean"):
        assert absent not in metrics
    assert metrics["rouge2_f1_mean"] == pytest.approx(1.0)  # what it does carry is scored
    rescored = next(r for r in client.search_runs([experiment])
                    if r.data.tags.get("mode") == "evaluate")
    path = client.download_artifacts(rescored.info.run_id, "predictions.eval.jsonl",
                                     str(tmp_path))
    for rec in (json.loads(line) for line in Path(path).read_text().splitlines()):
        why = rec["null_reasons"]
        for key in ("retrieval_recall", "retrieval_precision", "recall_at_5", "mrr_at_5"):
            assert rec[key] is None and why[key] == NO_RETRIEVAL
        for key in ("context_chunks", "context_tokens", "numeric_precision"):
            assert rec[key] is None and why[key] == NO_CONTEXT
        for key in ("cost_usd", "latency_ms", "loops", "input_tokens"):
            assert rec[key] is None and "does not carry" in why[key]
        assert rec["numeric_recall"] == 1.0


def test_a_bad_predictions_file_leaves_no_run(make_cfg, mini, tmp_path):
    """A single run (no sweep) stops before its run opens too."""
    path = write(tmp_path / "preds.jsonl", [good(t0)])
    with pytest.raises(PredictionsFileError, match="have no record"):
        run(make_cfg(f"dataset.root={mini}", "system=external", f"system.predictions={path}"))
    assert all_runs(tmp_path) == []
