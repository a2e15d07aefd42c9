"""A dry run prices a sweep without embedding anything it has not embedded before: with no
index of the corpus in the cache, semantic search ranks chunks by keywords, and the dry run
says its token counts are estimates."""

from __future__ import annotations

from arag.retrieval import KeywordStandIn
from runners.experiment import run
from runners.job import prepare
from runners.settings import read


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
