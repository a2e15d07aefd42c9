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
from runners.settings import read
from tests.conftest import all_runs, client_for, write_mini_dataset
from tracking.runs import rounded


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
    job = prepare(read(make_cfg(f"dataset.root={mini}", "system=external",
                           f"system.predictions={path}", "system.allow_missing=true")))
    assert [t.id for t in job.dataset.tasks] == [t1]
    assert job.system_class.run_metrics["n_tasks_missing"] == 1
    assert any("1 task(s) of the dataset have no prediction" in n for n in job.system_class.notes)


def test_a_task_the_pipeline_recorded_as_failed_is_an_error_whose_fix_is_the_file(
        make_cfg, mini, tmp_path):
    from runners.errors import error_metrics, too_many_errors

    path = write(tmp_path / "preds.jsonl", [good(t0), {"id": t1, "predicted": None,
                                                       "error": "our retriever timed out"}])
    job = prepare(read(make_cfg(f"dataset.root={mini}", "system=external",
                                f"system.predictions={path}")))
    system = job.system_class("external", None)  # type: ignore[arg-type]
    preds = [system.predict(t, "mini") for t in job.dataset.tasks]
    failed = next(p for p in preds if p.id == t1)
    assert failed.error == "our retriever timed out" and failed.error_kind == "pipeline"
    metrics = {"n_tasks": 2.0, "n_answered": 1.0, "n_errors": 1.0, **error_metrics(preds, {})}
    why = too_many_errors(metrics, job.cfg.runner)
    assert why is not None and "1 of 2 tasks errored (pipeline x1)" in why
    assert "the predictions file (system.predictions)" in why


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
    assert all(not c["lines"] for c in pred.contexts[3:])
    assert [bool(c["unmapped"]) for c in pred.contexts] == [False] * 3 + [True, False, True, True]
    assert "matches no sentence" in pred.contexts[3]["unmapped"]
    assert "no pages" in pred.contexts[6]["unmapped"]
    # a context from a document outside the dataset is an irrelevant read, not left out
    assert pred.contexts[4]["outside_dataset"] and pred.contexts[4]["chunk_ids"] == [
        "NOT_A_DOC#outside-4"]
    holding = {line: next(c.chunk_id for c in chunks if c.doc_id == t0 and c.covers(line))
               for line in (21, 41, 42)}
    # the retrieval is the chunks the located contexts lie in, in the order given
    assert pred.retrieved_chunk_ids == list(dict.fromkeys(
        [holding[41], holding[42], holding[21], "NOT_A_DOC#outside-4"]))
    assert pred.not_recorded == list(pred.not_recorded)  # measurements: not in the record
    assert {"cost_usd", "latency_ms", "loops"} <= set(pred.not_recorded)
    assert pred.cost_usd is None and pred.latency_ms is None


def test_a_record_without_contexts_declares_no_retrieval(make_cfg, mini, tmp_path):
    path = write(tmp_path / "preds.jsonl", [good(t0, cost_usd=0.01), good(t1, cost_usd=0.02)])
    job = prepare(read(make_cfg(f"dataset.root={mini}", "system=external",
                           f"system.predictions={path}")))
    cls = job.system_class
    assert not cls.retrieves and not cls.ranks
    assert any("judged against the task's whole documents" in n for n in cls.notes)


def test_an_edited_predictions_file_is_a_new_run(make_cfg, mini, tmp_path):
    path = write(tmp_path / "preds.jsonl", [good(t0), good(t1)])
    first = prepare(read(make_cfg(f"dataset.root={mini}", "system=external",
                             f"system.predictions={path}")))
    write(path, [good(t0), good(t1, predicted="Revenue fell.")])
    second = prepare(read(make_cfg(f"dataset.root={mini}", "system=external",
                              f"system.predictions={path}")))
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

    metrics = run(read(make_cfg(f"dataset.root={mini}", "mode=evaluate",
                           f"source_run_id={source.info.run_id}",
                           "metrics.scorers=[rouge,retrieval,ranking,context,numeric,length]")))
    for absent in ("retrieval_recall_mean", "retrieval_precision_mean", "recall_at_5_mean",
                   "context_chunks_mean", "context_tokens_mean", "numeric_precision_mean",
                   "cost_usd_total", "cost_usd_per_task", "cost_usd_answered_mean", "latency_ms_p50",
                   "loops_mean"):
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


@pytest.mark.slow
def test_a_bad_predictions_file_leaves_no_run(make_cfg, mini, tmp_path):
    """A single run (no sweep) stops before its run opens too."""
    path = write(tmp_path / "preds.jsonl", [good(t0)])
    with pytest.raises(PredictionsFileError, match="have no record"):
        run(read(make_cfg(f"dataset.root={mini}", "system=external",
                          f"system.predictions={path}")))
    assert all_runs(tmp_path) == []


# --- end to end: a pipeline's file swept beside the built-in systems ---------------------

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
SCORERS = "metrics.scorers=[rouge,retrieval,ranking,context,length,numeric]"
KS = (1, 3)


def sample_tasks() -> list[dict]:
    return [json.loads(line) for line in (SAMPLE / "tasks.jsonl").read_text().splitlines()]


def sample_lines(doc_id: str) -> list[str]:
    return (SAMPLE / "documents" / f"{doc_id}.txt").read_text().splitlines()


def pipeline_file(path: Path, contexts: bool = True) -> dict[str, dict]:
    """What another pipeline writes, made here from the sample's own files (never through
    the harness): its answer is two of the task's sentences, its contexts the lines it read
    (by line numbers, by bare text, and one text that is said nowhere in the call), its cost,
    latency, tokens and loops. Returns, per task, what the test knows about each record."""
    known, records = {}, []
    for n, task in enumerate(sample_tasks()):
        doc = task["doc_ids"][0]
        lines = sample_lines(doc)
        gold = task["gold_lines"][doc]
        read = [gold[0], gold[0] + 1, 3 + n]  # a gold sentence, its neighbour, an early one
        given = [{"text": " ".join(lines[i - 1] for i in read[:2]), "doc_id": doc,
                  "line_start": read[0], "line_end": read[1]},
                 lines[read[2] - 1]]  # a bare text: the harness finds it
        if n % 2:
            given.append({"text": "The weather in the region was mild this quarter, we hear.",
                          "doc_id": doc})
        record = {"id": task["id"], "predicted": f"{lines[gold[0] - 1]} {lines[5 + n]}",
                  "cost_usd": 0.001 * (n + 1), "latency_ms": 400.0 + 37 * n,
                  "input_tokens": 1000 + n, "output_tokens": 90 + n, "loops": 1 + n % 3}
        if contexts:
            record["contexts"] = given
        records.append(record)
        known[task["id"]] = {"record": record, "doc": doc, "lines": read,
                             "texts": [g if isinstance(g, str) else g["text"] for g in given],
                             "unmapped": len(given) - 2, "task": task}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return known


def chunk_of(doc: str, line: int, chunks) -> str:
    return next(c.chunk_id for c in chunks if c.doc_id == doc and c.line_start <= line
                <= c.line_end)


def expected_ranking(ranked: list[str], gold: list[int], doc: str, chunks
                     ) -> dict[str, float | None]:
    """Recall/MRR/nDCG/hit@k over gold lines, written out for non-overlapping chunks."""
    import math

    span = {c.chunk_id: (c.line_start, c.line_end) for c in chunks}

    def holds(cid: str) -> set[int]:
        first, last = span[cid]
        return {g for g in gold if first <= g <= last}

    seen: set[int] = set()
    gains = []
    for cid in ranked:
        gains.append(len(holds(cid) - seen))
        seen |= holds(cid)
    ideal = sorted((len(holds(c.chunk_id)) for c in chunks if c.doc_id == doc), reverse=True)
    depth = len(dict.fromkeys(ranked))
    complete = {c.chunk_id for c in chunks if c.doc_id == doc} <= set(ranked)
    out: dict[str, float | None] = {}
    for k in KS:
        if k > depth and not complete:  # rankings are compared only at depths they reach
            out.update({f"{m}_at_{k}": None for m in ("recall", "mrr", "ndcg", "hit_strict",
                                                       "hit_doc")})
            continue
        dcg = sum(g / math.log2(r + 1) for r, g in enumerate(gains[:k], start=1))
        idcg = sum(g / math.log2(r + 1) for r, g in enumerate(ideal[:k], start=1))
        out[f"recall_at_{k}"] = sum(gains[:k]) / len(gold)
        out[f"mrr_at_{k}"] = next((1 / r for r, g in enumerate(gains[:k], start=1) if g), 0.0)
        out[f"ndcg_at_{k}"] = min(1.0, dcg / idcg)
        out[f"hit_strict_at_{k}"] = float(any(gains[:k]))
        out[f"hit_doc_at_{k}"] = float(bool(ranked[:k]))  # every chunk is from the task's doc
    return out


def expected_task(known: dict, chunks) -> dict[str, float | None]:
    """Every per-task score of one record, computed from the file and the dataset."""
    from rouge_score import rouge_scorer

    from metrics.numeric import quantities, share_found

    record, doc, task = known["record"], known["doc"], known["task"]
    gold = task["gold_lines"][doc]
    ranked = list(dict.fromkeys(chunk_of(doc, line, chunks) for line in known["lines"]))
    gold_chunks = {chunk_of(doc, g, chunks) for g in gold}
    hits = len(set(ranked) & gold_chunks)
    context = "\n\n".join(known["texts"])
    rouge = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
                                     use_stemmer=True).score(task["reference"],
                                                             record["predicted"])
    words = len(record["predicted"].split())
    return {
        "retrieval_precision": hits / len(ranked), "retrieval_recall": hits / len(gold_chunks),
        **expected_ranking(ranked, gold, doc, chunks),
        "context_chunks": float(len(ranked)), "context_tokens": float(max(1, len(context) // 4)),
        "rouge1_f1": rouge["rouge1"].fmeasure, "rouge2_f1": rouge["rouge2"].fmeasure,
        "rougeL_f1": rouge["rougeL"].fmeasure, "rougeLsum_f1": rouge["rougeLsum"].fmeasure,
        "word_count": float(words), "length_ratio": words / 50,
        # the numeric metric's definition (its number parser), applied to the file's texts
        "numeric_precision": share_found(quantities(record["predicted"]), quantities(context)),
        "numeric_recall": share_found(quantities(task["reference"]),
                                      quantities(record["predicted"])),
        **{k: float(record[k]) for k in ("cost_usd", "latency_ms", "input_tokens",
                                         "output_tokens", "loops")},
        # what the scores rest on: the gold chunks, and the document's length (4 chars a token)
        "n_gold_chunks": float(len(gold_chunks)),
        "document_tokens": float(len("\n".join(sample_lines(doc))) // 4),
    }


def sample_chunks():
    from tests.conftest import compose_cfg

    cfg = compose_cfg(["dataset=sample"])
    return build_chunks(load_tasks(cfg).corpus, cfg.retrieval.chunk_size,
                        cfg.retrieval.chunk_overlap)


def run_of(tmp: Path, system: str):
    runs = [r for r in all_runs(tmp) if r.data.tags.get("system") == system]
    assert len(runs) == 1
    return runs[0]


def artifact(tmp: Path, run, name: str):
    path = client_for(tmp).download_artifacts(run.info.run_id, name, str(tmp / run.info.run_id))
    return Path(path).read_text()


@pytest.mark.slow
def test_a_pipelines_predictions_swept_with_arag_and_naive_score_as_computed_from_the_file(
        tmp_path):
    import numpy as np

    from metrics.aggregate import bootstrap_ci
    from tests.conftest import run_cli

    known = pipeline_file(tmp_path / "theirs.jsonl")
    result = run_cli(tmp_path, "system=arag,naive,external", "dataset=sample",
                     f"system.predictions={tmp_path / 'theirs.jsonl'}", SCORERS,
                     f"metrics.ranking.ks=[{','.join(map(str, KS))}]")
    assert result.returncode == 0, result.stderr[-3000:]
    for system in ("arag", "naive"):
        assert run_of(tmp_path, system).info.status == "FINISHED"
    ext = run_of(tmp_path, "external")
    assert ext.data.tags["system_retrieves"] == "true" and ext.data.tags["system_ranks"] == "true"

    chunks = sample_chunks()
    expected = {tid: expected_task(k, chunks) for tid, k in known.items()}
    records = {json.loads(line)["id"]: json.loads(line)
               for line in artifact(tmp_path, ext, "predictions.eval.jsonl").splitlines()}
    assert set(records) == set(expected)
    for tid, values in expected.items():  # every per-task score
        for key, value in values.items():
            assert records[tid][key] == pytest.approx(value), (tid, key)

    fields = {key: [v[key] for v in expected.values() if v[key] is not None]
              for key in next(iter(expected.values()))}
    # the task's document features (document_tokens, evidence_position, ...) are the data's,
    # not the file's: taken from the records, whose per-task values are checked elsewhere
    for key, value in next(iter(records.values())).items():
        if key not in fields and isinstance(value, int | float):
            fields[key] = [float(r[key]) for r in records.values() if r.get(key) is not None]
    n_contexts = sum(len(k["texts"]) for k in known.values())
    costs = [k["record"]["cost_usd"] for k in known.values()]
    latencies = fields["latency_ms"]
    counts = {"n_tasks": 6, "n_answered": 6, "n_errors": 0, "n_skipped": 0, "n_not_run": 0,
              "n_resumed": 0, "n_answered_again": 0, "n_repeats": 1, "n_task_ids": 6,
              "model_calls": 0, "model_calls_cached": 0, "n_tasks_missing": 0,
              "n_contexts": n_contexts, "n_tasks_without_context": 0, "n_records_ignored": 0,
              "n_contexts_outside_dataset": 0, "n_empty_answers": 0, "n_foreign_traces": 0,
              "n_records_past_limit": 0, "n_tasks_asked": 6, "n_tasks_of_data": 6,
              "n_contexts_unmapped": sum(k["unmapped"] for k in known.values()),
              "cost_usd_total": sum(costs), "cost_usd_per_task": sum(costs) / 6,
              "max_loops_reached_rate": 0.0,
              **{f"latency_ms_p{q}": float(np.percentile(latencies, q)) for q in (50, 90, 99)}}
    # what the dataset lets a comparison show: documents that fit in the 5-chunk budget
    per_doc = [sum(1 for c in chunks if c.doc_id == k["doc"]) for k in known.values()]
    within = sum(1 for n in per_doc if n <= 5)
    counts.update({"n_documents": 6, "context_budget_chunks": 5, "n_tasks_without_reference": 0,
                   "docs_within_context_budget": within,
                   "docs_within_context_budget_share": within / 6})
    metrics = {k: v for k, v in ext.data.metrics.items() if not k.startswith("headline/")}
    # cost's mean over answered tasks is named apart from the per-task spend
    fields["cost_usd_answered"] = fields["cost_usd"]
    for key, value in metrics.items():  # every metric of the run, from the file
        if key in counts:
            want = counts[key]
        elif key.endswith("_mean_n"):  # a mean over part of the tasks says its n
            want = float(len(fields[key[:-len("_mean_n")]]))
        elif key.endswith("_mean"):
            want = float(np.mean(fields[key[:-5]]))
        elif key.endswith(("_ci_low", "_ci_high")):
            field = key.rsplit("_ci_", 1)[0]
            want = bootstrap_ci(fields[field])[0 if key.endswith("low") else 1]
        elif key == "word_count_mean":
            want = float(np.mean(fields["word_count"]))
        else:
            raise AssertionError(f"metric {key} is not checked")
        assert value == pytest.approx(rounded(key, want)), key  # logged as MLflow shows it
    assert counts["n_contexts_unmapped"] == 3
    for key, value in ext.data.metrics.items():
        if key.startswith("headline/"):
            assert value == pytest.approx(ext.data.metrics[key.removeprefix("headline/")])
    # the sweep report says what could not be located
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    report = artifact(tmp_path, parent, "report.md")
    assert f"3 of {n_contexts} context text(s) could not be located" in report


@pytest.mark.slow
def test_predictions_without_contexts_are_judged_against_the_document_and_say_so(tmp_path):
    from metrics.numeric import quantities, share_found
    from tests.conftest import run_cli

    known = pipeline_file(tmp_path / "bare.jsonl", contexts=False)
    lines = (tmp_path / "bare.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    for key in ("cost_usd", "latency_ms"):  # one record gives no cost and no latency
        first.pop(key)
    (tmp_path / "bare.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = run_cli(tmp_path, "system=external", "dataset=sample", SCORERS,
                     f"system.predictions={tmp_path / 'bare.jsonl'}", sweep=False)
    assert result.returncode == 0, result.stderr[-3000:]
    ext = run_of(tmp_path, "external")
    assert ext.data.tags["system_retrieves"] == "false"
    records = [json.loads(line) for line in artifact(tmp_path, ext,
                                                     "predictions.eval.jsonl").splitlines()]
    for rec in records:
        k = known[rec["id"]]
        for key in ("retrieval_precision", "retrieval_recall", "recall_at_3", "ndcg_at_1"):
            assert rec[key] is None and rec["null_reasons"][key] == NO_RETRIEVAL
        # faithfulness-side scores are judged against the whole document
        document = "\n".join(sample_lines(k["doc"]))
        assert rec["numeric_precision"] == pytest.approx(share_found(
            quantities(k["record"]["predicted"]), quantities(document)))
        assert rec["context_chunks"] is None and rec["context_tokens"] is None
    assert records[0]["cost_usd"] is None and records[0]["latency_ms"] is None
    assert "does not carry cost_usd" in records[0]["null_reasons"]["cost_usd"]
    assert "cost_usd_total" not in ext.data.metrics  # not a total over the tasks that say
    assert ext.data.metrics["cost_usd_answered_mean"] == pytest.approx(
        sum(k["record"]["cost_usd"] for k in list(known.values())[1:]) / 5)
    report = artifact(tmp_path, ext, "report.md")
    assert "6 of 6 prediction(s) carry no context: faithfulness and numeric precision are " \
           "judged against the task's whole documents" in report
    assert "1 of 6 record(s) give no cost_usd: null, not 0" in report

    # re-scored from the run's own artifacts (the file is gone): the same scores and notes
    (tmp_path / "bare.jsonl").unlink()
    again = run_cli(tmp_path, "mode=evaluate", f"source_run_id={ext.info.run_id}", SCORERS,
                    sweep=False)
    assert again.returncode == 0, again.stderr[-3000:]
    rescored = next(r for r in all_runs(tmp_path) if r.data.tags.get("mode") == "evaluate")
    assert rescored.data.tags["system_retrieves"] == "false"
    assert "whole documents" in rescored.data.tags["system_notes"]
    again_records = [json.loads(line) for line in artifact(
        tmp_path, rescored, "predictions.eval.jsonl").splitlines()]
    # no model is named for the pipeline: its window is unknown, in the run and the re-score
    from runners.evaluate import PIPELINE_WINDOW_UNKNOWN
    assert all(r["fits_context"] is None and r["null_reasons"]["fits_context"]
               == PIPELINE_WINDOW_UNKNOWN for r in records + again_records)
    assert again_records == records


@pytest.mark.slow
@pytest.mark.parametrize("case", BAD_FILES)
def test_a_sweep_with_a_bad_predictions_file_exits_non_zero_and_leaves_no_run(case, mini,
                                                                              tmp_path):
    from tests.conftest import run_cli

    make, expected = BAD_FILES[case]
    path = write(tmp_path / "preds.jsonl", make([t0, t1]))
    result = run_cli(tmp_path, "system=naive,external", f"dataset.root={mini}",
                     f"system.predictions={path}")
    assert result.returncode != 0
    assert str(path) in result.stderr
    for part in expected:
        assert part in result.stderr
    assert all_runs(tmp_path) == []


def test_external_without_a_file_says_which_key_to_set(make_cfg, mini):
    from arag.config import ConfigError

    with pytest.raises(ConfigError, match="system.predictions is not set"):
        prepare(read(make_cfg(f"dataset.root={mini}", "system=external")))


def test_a_folder_is_named_a_folder_and_ids_past_dataset_limit_are_left_out(
        make_cfg, mini, loaded, tmp_path, monkeypatch):
    dataset, chunks = loaded
    folder = tmp_path / "ectsum_naive"
    folder.mkdir()
    write(folder / "predictions.jsonl", [good(t0), good(t1)])
    with pytest.raises(PredictionsFileError) as err:
        read_predictions(folder, dataset.tasks, dataset.corpus, chunks, allow_missing=False)
    assert "is a folder, not a file" in str(err.value) and "predictions.jsonl" in str(err.value)
    assert "not found" not in str(err.value)
    # dataset.limit=1 keeps t0: t1's record is past the limit, not "not a task"
    job = prepare(read(make_cfg(f"dataset.root={mini}", "dataset.limit=1", "system=external",
                                f"system.predictions={folder / 'predictions.jsonl'}")))
    assert [t.id for t in job.dataset.tasks] == [t0]
    assert job.system_class.run_metrics["n_records_past_limit"] == 1
    # a big file shows a bar of lines checked
    from arag import progress
    from arag.systems import predictions_file

    shown = []
    monkeypatch.setattr(predictions_file, "PROGRESS_FROM_BYTES", 10)
    monkeypatch.setattr(progress, "bar", lambda what, total, unit: shown.append(
        (what, total, unit)) or __import__("contextlib").nullcontext(
        type("Bar", (), {"update": lambda self, n: shown.append(n)})()))
    read_predictions(folder / "predictions.jsonl", dataset.tasks, dataset.corpus, chunks,
                     allow_missing=False)
    assert shown[0] == ("checking predictions.jsonl (0 MB)", 2, "line") and sum(shown[1:]) == 2
