"""Document features on every task and record: what slicing a comparison rests on."""

from __future__ import annotations

import pytest

from arag.datasets import load_dataset
from arag.datasets.features import FEATURES
from arag.llm import make_model
from arag.systems.builtin import Stuffing
from runners.evaluate import dataset_features, evaluate
from runners.job import build_system, prepare
from runners.settings import read
from tests.conftest import ROOT
from tests.test_folder import write_folder


def test_every_sample_task_carries_every_feature_with_evidence_where_its_gold_lies(make_cfg):
    ds = load_dataset(make_cfg().dataset, ROOT)
    features = dataset_features(ds, lambda task: True)
    for task in ds.tasks:
        f = features[task.id]
        assert set(FEATURES) <= set(f.values)
        doc = ds.corpus.documents[task.doc_ids[0]]
        assert f.values["document_tokens"] == len(doc.text) // 4
        assert f.values["n_documents"] == 1 and f.values["dataset"] == ds.name
        assert (f.values["company"], f.values["period"]) == (doc.company, doc.period)
        assert f.values["doc_type"] == "EARNINGS_CALL"
        gold = task.gold_lines[doc.doc_id]  # type: ignore[index]
        expected = sum((g - 1) / (len(doc.lines) - 1) for g in gold) / len(gold)
        assert f.values["evidence_position"] == pytest.approx(expected)
        assert 0 <= f.values["evidence_position"] <= 1 and not f.null_reasons


def test_records_carry_features_and_a_null_feature_its_reason(make_cfg, tmp_path):
    """A folder dataset names no company or period and a summary task has no gold: those
    are null with the reason on the record; its file type is an adapter feature."""
    root = write_folder(tmp_path / "docs")
    cfg = make_cfg("dataset=folder", f"dataset.root={root}", "system=stuffing")
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    # a window that holds the shorter half of the documents
    needed = sorted(Stuffing.prompt_tokens(t, system.ctx) for t in job.dataset.tasks)
    system.ctx.context_limit = system.ctx.max_tokens + needed[len(needed) // 2 - 1]
    features = dataset_features(job.dataset, lambda t: Stuffing.fits(t, system.ctx))
    preds = [system.predict(t, "docs") for t in job.dataset.tasks]
    records = evaluate(preds, {t.id: t for t in job.dataset.tasks}, job.dataset.corpus, [], [],
                       cfg.target_length, job.system_class, features=features)
    by_id = {r["id"]: r for r in records}
    pdf = by_id[next(t.id for t in job.dataset.tasks if t.doc_ids == ("filings/acme_10k",))]
    assert pdf["file_type"] == "pdf"
    for record in records:
        for name in ("company", "period", "evidence_position"):
            assert record[name] is None and record["null_reasons"][name]
        # stuffing skipped exactly the tasks whose documents do not fit: the same rule
        assert record["fits_context"] is not bool(record["skipped"])
    assert {r["fits_context"] for r in records} == {True, False}


def test_without_the_models_window_fits_context_is_null_with_the_reason(make_cfg):
    ds = load_dataset(make_cfg().dataset, ROOT)
    f = dataset_features(ds)[ds.tasks[0].id]
    assert f.values["fits_context"] is None and "window" in f.null_reasons["fits_context"]



def test_a_rescoring_knows_the_runs_window_and_external_predictions_say_why_not(make_cfg):
    """mode=evaluate builds no model: fits_context comes from the config's window by
    stuffing's rule; predictions made elsewhere with no model named keep it null, saying how
    to name one."""
    from runners.evaluate import PIPELINE_WINDOW_UNKNOWN, window_rule

    job = prepare(read(make_cfg("system=stuffing")))
    needed = sorted(Stuffing.request_tokens(t, job.dataset.corpus, job.cfg.summarization_style
                                            .value, job.cfg.target_length)
                    for t in job.dataset.tasks)
    # a window that holds the shorter half of the documents
    cfg = make_cfg("system=stuffing", f"model.context_limit="
                   f"{job.cfg.system.max_tokens + needed[len(needed) // 2 - 1]}")
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    fits, why = window_rule(cfg, job.system_class, job.dataset.corpus)
    assert fits is not None and why is None
    said = {t.id: fits(t) for t in job.dataset.tasks}
    assert said == {t.id: Stuffing.fits(t, system.ctx) for t in job.dataset.tasks}
    assert set(said.values()) == {True, False}  # the small window splits the sample

    external = type("Outside", (Stuffing,), {"calls_models": False})
    fits, why = window_rule(cfg, external, job.dataset.corpus)
    assert fits is None and why == PIPELINE_WINDOW_UNKNOWN and "model=" in why
    f = dataset_features(job.dataset, fits, why)[job.dataset.tasks[0].id]
    assert f.values["fits_context"] is None and f.null_reasons["fits_context"] == why
    named = make_cfg("system=stuffing", "model=claude-haiku-4-5")
    assert window_rule(named, external, job.dataset.corpus)[0] is not None
