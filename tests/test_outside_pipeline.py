"""Another project's prediction files, as they are: their own ids (mapped by a file), their
own trace format, skipped and empty answers, loops and max_loops_reached, a model label.
The files are built here from the shipped sample, never through the harness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from arag.datasets import DatasetError
from arag.datasets.references import with_references
from arag.retrieval import build_chunks
from arag.systems.predictions_file import PredictionsFileError, read_id_map, read_predictions
from runners.job import load_tasks, prepare
from runners.settings import read
from tests.conftest import all_runs, client_for, compose_cfg, run_cli
from tracking.runs import rounded

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
LABEL = "claude-sonnet-4-6"
FILES = ("arag_sonnet", "naive_sonnet", "stuffing_sonnet")


def sample_tasks() -> list[dict]:
    return [json.loads(line) for line in (SAMPLE / "tasks.jsonl").read_text().splitlines()]


def their_id(n: int) -> str:
    return f"ectsum-test-{n:04d}"


def their_record(kind: str, n: int, task: dict) -> dict:
    """One line as the other project writes it (field names and a trace of its own)."""
    doc = task["doc_ids"][0]
    lines = (SAMPLE / "documents" / f"{doc}.txt").read_text().splitlines()
    gold = task["gold_lines"][doc]
    answer = f"{lines[gold[0] - 1]} {lines[4 + n + 3 * FILES.index(kind)]}"
    record = {"id": their_id(n), "predicted": answer,
              "cost_usd": round(0.004 * (n + 1) + 0.01 * FILES.index(kind), 6),
              "latency_ms": 900.0 + 113 * n + 250 * FILES.index(kind),
              "input_tokens": 2000 + n, "output_tokens": 120 + n, "skipped": False}
    if kind == "arag_sonnet":
        record.update(loops=2 + n % 4, max_loops_reached=n in (1, 4),
                      trace=[{"step": i, "action": "keyword_search", "input": "revenue"}
                             for i in range(2 + n % 4)])
    else:
        record.update(loops=1, max_loops_reached=False)
    if kind == "stuffing_sonnet" and n == 2:  # over its window: a legitimate skip
        record.update(predicted=None, skipped=True, skip_reason="over the context window",
                      cost_usd=0.0, latency_ms=0.0)
    if kind == "stuffing_sonnet" and n == 3:  # an empty answer with no error
        record.update(predicted="", cost_usd=0.0, latency_ms=0.0)
    return record


def write_files(tmp: Path) -> tuple[dict[str, list[dict]], Path]:
    tasks = sample_tasks()
    id_map = tmp / "ids.json"
    id_map.write_text(json.dumps({their_id(n): t["id"] for n, t in enumerate(tasks)}))
    files = {}
    for kind in FILES:
        files[kind] = [their_record(kind, n, t) for n, t in enumerate(tasks)]
        (tmp / f"{kind}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in files[kind]))
    return files, id_map


def loaded():
    cfg = compose_cfg(["dataset=sample"])
    dataset = load_tasks(cfg)
    return dataset, build_chunks(dataset.corpus, cfg.retrieval.chunk_size,
                                 cfg.retrieval.chunk_overlap)


def test_a_bad_id_names_three_valid_ids_and_the_two_ways_out(tmp_path):
    files, _ = write_files(tmp_path)
    dataset, chunks = loaded()
    with pytest.raises(PredictionsFileError) as err:
        read_predictions(tmp_path / "naive_sonnet.jsonl", dataset.tasks, dataset.corpus,
                         chunks, allow_missing=False)
    message = str(err.value)
    valid = [t.id for t in dataset.tasks[:3]]
    assert f"look like {valid[0]!r}, {valid[1]!r}, {valid[2]!r}" in message
    assert "system.id_map=FILE" in message and "system.ignore_extra=true" in message


def test_an_id_map_as_csv_and_ignore_extra_leave_out_what_is_not_a_task(make_cfg, tmp_path):
    files, _ = write_files(tmp_path)
    tasks = sample_tasks()
    (tmp_path / "ids.csv").write_text("their_id,task_id\n" + "".join(
        f"{their_id(n)},{t['id']}\n" for n, t in enumerate(tasks)))
    extra = {**files["naive_sonnet"][0], "id": "ectsum-test-9999"}  # a call not in the sample
    path = tmp_path / "more.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*files["naive_sonnet"], extra]))
    job = prepare(read(make_cfg("dataset=sample", "system=external",
                                f"system.predictions={path}",
                                f"system.id_map={tmp_path / 'ids.csv'}",
                                "system.ignore_extra=true")))
    cls = job.system_class
    assert sorted(cls.predictions) == sorted(t["id"] for t in tasks)
    assert cls.run_metrics["n_records_ignored"] == 1
    assert any("1 record(s) of the file are not tasks" in n for n in cls.notes)
    assert read_id_map(tmp_path / "ids.csv")[their_id(0)] == tasks[0]["id"]


def test_a_foreign_trace_is_kept_with_a_note_and_records_declare_an_agent(make_cfg, tmp_path):
    files, id_map = write_files(tmp_path)
    job = prepare(read(make_cfg("dataset=sample", "system=external",
                                f"system.predictions={tmp_path / 'arag_sonnet.jsonl'}",
                                f"system.id_map={id_map}", f"system.model_label={LABEL}")))
    cls = job.system_class
    assert cls.agentic and not cls.retrieves and not cls.long_context  # loops > 1, no contexts
    kept = cls.artifacts["foreign_traces.json"]
    assert kept[sample_tasks()[0]["id"]] == files["arag_sonnet"][0]["trace"]
    assert any("6 record(s) carry a trace in a format of their own" in n for n in cls.notes)
    assert all(p.trace == [] for p in cls.predictions.values())  # not scored
    assert not any("model is not named" in n for n in cls.notes)


def test_a_references_file_fills_the_references_and_is_named(tmp_path):
    dataset, _ = loaded()
    ids = [t.id for t in dataset.tasks]
    path = tmp_path / "ours.jsonl"
    path.write_text(json.dumps({"id": ids[1], "reference": "Our own summary."}) + "\n")
    ours = with_references(dataset, path)
    assert ours.tasks[1].reference == "Our own summary."
    assert ours.tasks[0].reference == dataset.tasks[0].reference
    assert "references from ours.jsonl (dataset.references): 1 of 6 task(s)" in ours.notes[-1]
    path.write_text(json.dumps({"id": "NOPE", "reference": "x"}) + "\n")
    with pytest.raises(DatasetError, match=f"look like {ids[0]!r}"):
        with_references(dataset, path)


def artifact(tmp: Path, run, name: str) -> str:
    path = client_for(tmp).download_artifacts(run.info.run_id, name, str(tmp / run.info.run_id))
    return Path(path).read_text()


@pytest.mark.slow
def test_three_files_of_another_project_score_in_one_sweep_as_three_named_runs(tmp_path):
    from rouge_score import rouge_scorer

    files, id_map = write_files(tmp_path)
    paths = ",".join(str(tmp_path / f"{k}.jsonl") for k in FILES)
    result = run_cli(tmp_path, "system=external", "dataset=sample",
                     f"system.predictions={paths}", f"system.id_map={id_map}",
                     f"system.model_label={LABEL}", "metrics.scorers=[rouge,length]")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {r.data.tags["run_label"]: r for r in all_runs(tmp_path)
            if r.data.tags.get("role") != "sweep_parent"}
    assert sorted(runs) == sorted(FILES)  # named after their files, and the data
    assert all(r.info.run_name == f"{k} sample" for k, r in runs.items())
    tasks = {their_id(n): t for n, t in enumerate(sample_tasks())}
    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    for kind, records in files.items():
        run = runs[kind]
        m = run.data.metrics
        assert run.info.status == "FINISHED" and run.data.tags["model"] == LABEL
        answered = [r for r in records if not r.get("skipped") and r["predicted"]]
        assert m["n_skipped"] == len(records) - len(answered)
        assert m["cost_usd_total"] == pytest.approx(sum(r["cost_usd"] for r in records))
        p50 = float(np.percentile([r["latency_ms"] for r in answered], 50))
        assert m["latency_ms_p50"] == pytest.approx(rounded("latency_ms_p50", p50))
        reached = float(np.mean([r["max_loops_reached"] for r in answered]))
        assert m["max_loops_reached_rate"] == pytest.approx(
            rounded("max_loops_reached_rate", reached))
        assert "model_calls" not in m  # the files do not say: null, not 0
        evals = {json.loads(line)["id"]: json.loads(line)
                 for line in artifact(tmp_path, run, "predictions.eval.jsonl").splitlines()}
        for r in answered:
            task = tasks[r["id"]]
            want = scorer.score(task["reference"], r["predicted"])["rouge2"].fmeasure
            assert evals[task["id"]]["rouge2_f1"] == pytest.approx(want)
    assert runs["stuffing_sonnet"].data.metrics["n_empty_answers"] == 1
    assert runs["arag_sonnet"].data.tags["system_agentic"] == "true"
    assert runs["naive_sonnet"].data.tags["system_agentic"] == "false"
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    report = artifact(tmp_path, parent, "report.md")
    assert "stand-in" not in report  # no offline caveat: the model is labelled
    assert "searches with" not in report and "reading the whole document" not in report
    # the agentic file is put to the agent-vs-baselines question
    assert "**arag_sonnet** vs **naive_sonnet**" in report
    assert "**arag_sonnet** vs **stuffing_sonnet**" in report
    assert "Predicted (external)" not in report
    assert "1 task(s) skipped by the pipeline (most often: over the context window)" in report
    assert "1 record(s) give an empty answer and no error" in report
    assert "carry a trace in a format of their own" in report


def test_the_id_maps_and_references_contents_join_the_run_identity(make_cfg, tmp_path):
    from runners.identity import config_hash, predictions_hash

    files, id_map = write_files(tmp_path)
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": sample_tasks()[0]["id"], "reference": "Ours."}) + "\n")

    def hashes() -> tuple[str, str]:
        cfg = make_cfg("dataset=sample", "system=external", f"dataset.references={refs}",
                       f"system.predictions={tmp_path / 'naive_sonnet.jsonl'}",
                       f"system.id_map={id_map}")
        return config_hash(cfg), predictions_hash(cfg)

    first = hashes()
    id_map.write_text(json.dumps({their_id(n): t["id"] for n, t in
                                  enumerate(reversed(sample_tasks()))}))
    remapped = hashes()
    assert remapped[0] != first[0] and remapped[1] != first[1]  # other answers per task
    refs.write_text(json.dumps({"id": sample_tasks()[0]["id"], "reference": "Ours, v2."}) + "\n")
    rereferenced = hashes()
    assert rereferenced[0] != remapped[0]  # a new run...
    assert rereferenced[1] == remapped[1]  # ...scoring the same predictions


def test_references_of_ones_own_reach_the_tasks_a_run_scores(make_cfg, tmp_path):
    task = sample_tasks()[0]
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": task["id"], "reference": "Our summary."}) + "\n")
    job = prepare(read(make_cfg("dataset=sample", f"dataset.references={refs}")))
    assert next(t for t in job.dataset.tasks if t.id == task["id"]).reference == "Our summary."
    assert "references from refs.jsonl" in job.dataset.notes[-1]


def test_a_context_from_a_document_outside_the_dataset_is_an_irrelevant_read(make_cfg,
                                                                            tmp_path):
    from metrics.retrieval import precision_recall

    tasks = sample_tasks()
    doc = tasks[0]["doc_ids"][0]
    gold = tasks[0]["gold_lines"][doc][0]
    records = [{"id": t["id"], "predicted": "Revenue rose."} for t in tasks]
    records[0]["contexts"] = [{"text": "gold", "doc_id": doc, "line_start": gold},
                              {"text": "a wrong filing", "doc_id": "OTHER_10K_2023"}]
    path = tmp_path / "theirs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    cls = prepare(read(make_cfg("dataset=sample", "system=external",
                                f"system.predictions={path}"))).system_class
    pred = cls.predictions[tasks[0]["id"]]
    precision, _ = precision_recall(pred.retrieved_chunk_ids, set(pred.retrieved_chunk_ids[:1]))
    assert precision == 0.5  # the gold chunk and the wrong filing's read
    assert cls.run_metrics["n_contexts_outside_dataset"] == 1
    assert cls.run_metrics["n_contexts_unmapped"] == 0
    assert any("1 context(s) come from documents outside the dataset" in n for n in cls.notes)


def test_a_run_declares_what_its_records_cannot_show_and_a_typo_names_the_choices(make_cfg,
                                                                                  tmp_path):
    from arag.config import ConfigError

    write_files(tmp_path)
    base = ["dataset=sample", "system=external",
            f"system.predictions={tmp_path / 'stuffing_sonnet.jsonl'}",
            f"system.id_map={tmp_path / 'ids.json'}"]
    cls = prepare(read(make_cfg(*base))).system_class
    assert not cls.long_context and not cls.agentic  # one loop a record, nothing declared
    cls = prepare(read(make_cfg(*base, "+system.options.declares=[long_context]"))).system_class
    assert cls.long_context and cls.run_label("external", "x/stuffing_sonnet.jsonl") == \
        "stuffing_sonnet"
    with pytest.raises(ConfigError, match="'agentc' is not a declaration; use any of"):
        prepare(read(make_cfg(*base, "+system.options.declares=[agentc]")))


@pytest.mark.parametrize("system", ["arag", "naive", "stuffing"])
def test_settings_only_external_reads_leave_other_systems_identity_alone(make_cfg, tmp_path,
                                                                         system):
    """``system=arag,naive,external system.predictions=F`` after ``system=arag,naive``: arag
    and naive are the same runs and predictions as before, and F is not even read for them."""
    from runners.identity import config_hash, predictions_hash

    files, id_map = write_files(tmp_path)
    alone = make_cfg("dataset=sample", f"system={system}")
    beside = make_cfg("dataset=sample", f"system={system}",
                      f"system.predictions={tmp_path / 'naive_sonnet.jsonl'}",
                      f"system.id_map={id_map}", "system.model_label=sonnet",
                      "system.allow_missing=true", "system.ignore_extra=true")
    assert config_hash(beside) == config_hash(alone)
    assert predictions_hash(beside) == predictions_hash(alone)
    external = [make_cfg("dataset=sample", "system=external", f"system.predictions={p}")
                for p in (tmp_path / "naive_sonnet.jsonl", tmp_path / "arag_sonnet.jsonl")]
    assert config_hash(external[0]) != config_hash(external[1])  # external reads them


def test_prediction_files_with_one_stem_are_named_by_the_folders_that_tell_them_apart():
    from runners.naming import distinct_file_labels

    files = ["out/ectsum/predictions.jsonl", "out/ectsum_naive/predictions.jsonl",
             "out/ectsum_stuffing/predictions.jsonl", "elsewhere/naive_v2.jsonl"]
    assert distinct_file_labels(files) == {
        "out/ectsum/predictions.jsonl": "ectsum",
        "out/ectsum_naive/predictions.jsonl": "ectsum_naive",
        "out/ectsum_stuffing/predictions.jsonl": "ectsum_stuffing",
        "elsewhere/naive_v2.jsonl": "naive_v2"}
    deeper = distinct_file_labels(["a/run/p.jsonl", "b/run/p.jsonl"])
    assert deeper == {"a/run/p.jsonl": "a/run", "b/run/p.jsonl": "b/run"}


def test_a_sweep_whose_runs_would_share_a_name_is_refused_before_anything_runs(tmp_path):
    from runners.naming import _system_label, sweep_labels
    from runners.validation import ConfigError

    folders = [tmp_path / name for name in ("ectsum", "ectsum_naive", "ectsum_stuffing")]
    for folder in folders:
        folder.mkdir()
        (folder / "predictions.jsonl").write_text("")

    def job(*overrides: str):
        return compose_cfg(["dataset=sample", *overrides])

    jobs = [job("system=external", f"system.predictions={f / 'predictions.jsonl'}")
            for f in folders] + [job("system=arag")]
    labels = sweep_labels(jobs, ["system", "system.predictions"])
    assert sorted(_system_label(j, labels) for j in jobs) == \
        ["arag", "ectsum", "ectsum_naive", "ectsum_stuffing"]
    (folders[0] / "predictions.json").write_text("")  # the same stem in the same folder
    same = [job("system=external", f"system.predictions={folders[0] / name}")
            for name in ("predictions.jsonl", "predictions.json")]
    with pytest.raises(ConfigError, match="would both be called 'predictions'.*Fix: give each"):
        sweep_labels(same, ["system.predictions"])
    named = [job(f"system={kind}", "system.name=mine") for kind in ("arag", "naive")]
    with pytest.raises(ConfigError, match="would both be called 'mine'"):
        sweep_labels(named, ["system"])
    # one system swept over a key: the key's values tell its runs apart
    loops = [job("system=arag", f"max_loops={n}") for n in (3, 6)]
    assert sweep_labels(loops, ["system", "max_loops"]) == {}
