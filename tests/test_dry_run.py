"""A dry run prices a sweep without embedding anything it has not embedded before: with no
index of the corpus in the cache, semantic search ranks chunks by keywords, and the dry run
says its token counts are estimates."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from arag.retrieval import KeywordStandIn
from runners.experiment import run
from runners.job import prepare
from runners.settings import read
from tests.conftest import ROOT, SHARED

FB = SHARED / "financebench"


def test_a_dry_run_on_a_cold_cache_embeds_nothing_and_says_it_estimates(make_cfg, tmp_path,
                                                                        capsys):
    cfg = make_cfg("system=arag", "dataset=sample", "dataset.limit=2", "model=claude-haiku-4-5",
                   "runner.dry_run=true", fresh_cache=True)
    cost = run(read(cfg))["estimated_cost_usd"]
    printed = capsys.readouterr().out
    assert cost > 0 and "[dry run] arag: 2 tasks" in printed
    assert "embedded nothing and ranked chunks by keywords" in printed
    assert "tokens and cost, are approximate" in printed
    cache = tmp_path / "cache"
    assert not (cache / "index").exists() and not (cache / "embeddings").exists()


def test_the_stand_in_searches_the_runs_own_chunks_by_the_querys_words(make_cfg):
    job = prepare(read(make_cfg("system=naive", "dataset=sample", "runner.dry_run=true",
                                fresh_cache=True)))
    index = job.index_loader()
    assert isinstance(index, KeywordStandIn) and job.index_estimated
    hits = index.semantic_search("What was the revenue guidance?", 3)
    assert hits and all("revenue" in index.by_id[h.chunk_id].body.lower()
                        or "guidance" in index.by_id[h.chunk_id].body.lower() for h in hits)


def test_a_damaged_cached_index_is_not_rebuilt_by_a_dry_run(make_cfg, tmp_path, capsys):
    """A real run would re-embed the corpus over an unreadable entry; the dry run searches
    the keyword stand-in instead and says why."""
    cfg = make_cfg("system=naive", "dataset=sample", "dataset.limit=2", "model=claude-haiku-4-5",
                   "runner.dry_run=true", fresh_cache=True)
    key = prepare(read(cfg)).index_loader().key
    entry = tmp_path / "cache" / "index" / key
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text('{"format": 1, "key": "')  # cut off mid-write
    run(read(cfg))
    printed = capsys.readouterr().out
    assert f"the cached index {entry} is unreadable" in printed
    assert "embedded nothing and ranked chunks by keywords" in printed
    assert not (tmp_path / "cache" / "embeddings").exists()
    assert (entry / "meta.json").read_text() == '{"format": 1, "key": "'  # left as it was


@pytest.mark.skipif(not (FB / "pdfs").is_dir(),
                    reason=f"../shared/datasets not present: {FB} (clone "
                           "github.com/patronus-ai/financebench)")
def test_a_cold_dry_run_on_financebench_parses_its_filing_and_embeds_nothing(make_cfg,
                                                                              tmp_path):
    cfg = make_cfg("system=naive", "dataset=financebench_qfs", f"dataset.root={FB}",
                   "dataset.limit=2", "runner.dry_run=true", fresh_cache=True)
    result = run(read(cfg))
    assert result["n_tasks"] == 2 and result["index_sentences_embedded"] == 0
    cache = tmp_path / "cache"
    parsed = list((cache / "parsed").glob("*.json"))  # both tasks are on the first 10-K
    assert len(parsed) == 1 and parsed[0].name.endswith(".pdfium.json")
    assert not (cache / "embeddings").exists() and not (cache / "index").exists()


def test_a_long_text_is_counted_on_samples_close_to_its_full_count():
    """A whole filing (what stuffing sends) is counted on evenly spaced slices; a text of
    ordinary size is counted in full."""
    from arag.llm import tokens as dryrun  # the estimate the dry run and the limiter share

    text = "\n".join(f.read_text(encoding="utf-8")
                     for f in sorted((ROOT / "data" / "sample" / "documents").glob("*.txt")))
    text = (text * (1 + 3 * dryrun.EXACT_CHARS // len(text)))[:3 * dryrun.EXACT_CHARS + 17]
    full = len(dryrun._tokenizer().encode(text, add_special_tokens=False).ids)
    exact = int(full * dryrun.CLAUDE_PER_WORDPIECE) + 1
    assert abs(dryrun.count_tokens(text) - exact) / exact < 0.05
    short = text[:dryrun.EXACT_CHARS]
    assert dryrun.count_tokens(short) == int(len(dryrun._tokenizer().encode(
        short, add_special_tokens=False).ids) * dryrun.CLAUDE_PER_WORDPIECE) + 1


def test_tokens_are_counted_as_the_packaged_models_own_tokenizer_counts_them():
    """The dry run reads the MiniLM's tokenizer.json with ``tokenizers`` alone (no torch):
    its counts are the ones transformers' tokenizer of that model gives."""
    from transformers import AutoTokenizer

    from arag.llm import tokens as dryrun  # the estimate the dry run and the limiter share
    from arag.retrieval.embedder import packaged_minilm_path

    reference = AutoTokenizer.from_pretrained(packaged_minilm_path())
    texts = [f.read_text(encoding="utf-8")
             for f in sorted((ROOT / "data" / "sample" / "documents").glob("*.txt"))]
    texts += ["Net sales rose 12% to $4.1 billion (€3.8bn) in FY2023 \u2014 see Item 7A.",
              '{"role": "user", "content": "Summarize\\n<question>x</question>"}', ""]
    for text in texts:  # longer than the model's 512-token input: nothing is cut
        expected = len(reference(text, add_special_tokens=False, truncation=False)["input_ids"])
        assert len(dryrun._tokenizer().encode(text, add_special_tokens=False).ids) == expected
        assert dryrun.count_tokens(text) == int(expected * dryrun.CLAUDE_PER_WORDPIECE) + 1


def test_a_dry_run_never_imports_the_embedding_stack_mlflow_or_nltk(tmp_path):
    """A dry run embeds nothing, tracks nothing and scores nothing, so it does not pay to
    import torch, sentence-transformers, transformers, bert-score, MLflow or NLTK (seconds of
    its start)."""
    heavy = ("torch", "sentence_transformers", "transformers", "bert_score", "mlflow", "nltk")
    cmd = [sys.executable, "-X", "importtime", "run.py", "-m", "system=arag,naive,stuffing",
           "dataset=sample", "dataset.limit=2", "runner.dry_run=true",
           f"cache.dir={tmp_path}/cache", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
           f"runner.runs_dir={tmp_path}/runs", f"hydra.sweep.dir={tmp_path}/multirun"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[dry run] sweep total: 3 jobs" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & set(heavy), sorted(imported & set(heavy))


@pytest.mark.parametrize("system", ["arag", "stuffing"])
def test_tasks_estimated_on_every_core_add_up_to_the_one_process_estimate(make_cfg, tmp_path,
                                                                         monkeypatch, system):
    """A dry run of many tasks splits them over processes forked per core; the calls, the
    tokens and every answer are those of one process estimating them in order."""
    import os

    from arag.systems.base import System
    from runners import dryrun
    from runners.job import build_system
    from tests.conftest import write_mini_dataset

    root = write_mini_dataset(tmp_path / "many", n_docs=20, filler=30)
    job = prepare(read(make_cfg(f"system={system}", f"dataset.root={root}",
                                "model=claude-haiku-4-5", "runner.dry_run=true")))
    cfg = job.cfg

    def estimate():
        return dryrun.estimate(system, lambda m: build_system(job, m), job.dataset.tasks,
                               cfg.model, job.dataset.name, cfg.model.offline)

    monkeypatch.setattr(dryrun, "TASKS_PER_WORKER", 10_000)
    alone = estimate()
    pids = tmp_path / "pids"
    predict = System.predict

    def spied(self, task, source):  # runs in the forked processes, which inherit it
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")
        # a worker waits for the other to start, so a fast one cannot take both slices
        deadline = time.monotonic() + 60
        while len(set(pids.read_text().split())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return predict(self, task, source)

    monkeypatch.setattr(dryrun, "TASKS_PER_WORKER", 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(System, "predict", spied)
    split = estimate()
    workers = pids.read_text().split()  # a pid per task predicted
    assert len(workers) == 20 and len(set(workers)) == 2 and str(os.getpid()) not in workers
    assert alone.n_tasks == split.n_tasks == 20 and alone.n_calls >= 20
    assert (split.n_calls, split.input_tokens, split.output_tokens, split.cost_usd) == \
        (alone.n_calls, alone.input_tokens, alone.output_tokens, alone.cost_usd)
    assert [(p.id, p.predicted, p.loops) for p in split.predictions] == \
        [(p.id, p.predicted, p.loops) for p in alone.predictions]
