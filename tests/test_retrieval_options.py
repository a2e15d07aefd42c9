"""Retrieval options on the sample corpus: BM25, hybrid fusion, neighbours, contextual headers,
rerank and HyDE (priced and cached), and one context budget for every retrieving system."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hydra.errors import ConfigCompositionException

from arag.datasets import load_dataset
from arag.llm import Prices
from arag.llm.cache import CachedModel
from arag.llm.offline import OfflineModel
from arag.llm.scripted import ScriptedModel
from arag.retrieval import (
    Method,
    RetrievalSettings,
    bm25_for,
    fuse,
    index_key,
    load_or_build_index,
    rank_chunks,
    with_neighbors,
)
from arag.retrieval.index import Hit, embedded_texts
from arag.retrieval.query import hyde_query
from arag.systems import NaiveRAG, SystemContext, make_system
from arag.trace import ModelCall, Retrieval
from runners.identity import predictions_hash
from runners.validation import ConfigError, validate_config
from tests.conftest import ROOT, compose_cfg, store_overrides, write_mini_dataset

TOOLS = ["keyword_search", "semantic_search", "chunk_read"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory, shared_cache):
    tmp = tmp_path_factory.mktemp("options")
    cfg = compose_cfg(store_overrides(tmp, shared_cache))  # the sample index other tests use
    ds = load_dataset(cfg.dataset, ROOT)
    return cfg, ds, load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)


def _ctx(model, ds, index, top_k=5, **settings) -> SystemContext:
    return SystemContext(model=model, prices=Prices(1.0, 5.0, 0.1, 1.25), corpus=ds.corpus,
                         index_loader=lambda: index, style="earnings_call", target_length=50,
                         max_loops=22, top_k=top_k, scope="document", tools=TOOLS,
                         max_tokens=512, temperature=0.0, context_limit=200_000,
                         retrieval=RetrievalSettings(**settings))


def test_bm25_ranks_the_chunk_with_an_exact_figure_first(sample):
    _, ds, index = sample
    task = ds.tasks[0]
    figure = "612.4"  # KBTX's revenue, in one sentence of its call
    holding = [c.chunk_id for c in index.chunks_of(list(task.doc_ids)) if figure in c.body]
    assert len(holding) == 1
    hits = rank_chunks(index, f"revenue of {figure} million", 5, list(task.doc_ids),
                       Method("bm25"))
    assert hits[0].chunk_id == holding[0] and figure in hits[0].snippet
    assert all(h.chunk_id.startswith(task.doc_ids[0]) for h in hits)  # scoped to the task
    # a query sharing no term with the corpus finds nothing rather than arbitrary chunks
    assert rank_chunks(index, "zzyzx qwertyuiop", 5, None, Method("bm25")) == []


def test_hybrid_fusion_is_deterministic_and_follows_the_formula(sample):
    _, ds, index = sample
    doc_ids = list(ds.tasks[1].doc_ids)
    hybrid = Method("hybrid", fusion_k=60, dense_weight=0.5)
    first = rank_chunks(index, ds.tasks[1].question, 8, doc_ids, hybrid)
    assert [h.chunk_id for h in first] == [
        h.chunk_id for h in rank_chunks(index, ds.tasks[1].question, 8, doc_ids, hybrid)]
    a, b, c = (index.chunks[i].chunk_id for i in (0, 1, 2))
    fused = fuse([[Hit(a, 1, "x"), Hit(b, 1, "y")], [Hit(b, 9, "z"), Hit(c, 9, "w")]],
                 [0.5, 0.5], 60, index)
    assert [h.chunk_id for h in fused] == [b, a, c]
    assert fused[0].score == pytest.approx(0.5 / 62 + 0.5 / 61)
    # equal scores: the chunk that comes first in the index wins, whatever the list order
    tied = fuse([[Hit(c, 1, "")], [Hit(a, 1, "")]], [0.5, 0.5], 60, index)
    assert [h.chunk_id for h in tied] == [a, c]
    # the weight moves the order: dense only vs bm25 only
    dense_only = rank_chunks(index, ds.tasks[1].question, 5, doc_ids, Method("hybrid", 60, 1.0))
    assert [h.chunk_id for h in dense_only] == [
        h.chunk_id for h in rank_chunks(index, ds.tasks[1].question, 5, doc_ids, Method())]


def test_neighbours_stay_in_the_document_and_count_in_the_budget(sample):
    _, ds, index = sample
    first_of_second_doc = next(i for i, c in enumerate(index.chunks)
                               if c.doc_id != index.chunks[0].doc_id)
    hit = index.chunks[first_of_second_doc]
    widened = with_neighbors(index, [hit.chunk_id], neighbors=1, budget=5)
    assert widened == [hit.chunk_id, index.chunks[first_of_second_doc + 1].chunk_id]
    assert all(index.by_id[c].doc_id == hit.doc_id for c in widened)
    middle = index.chunks[first_of_second_doc + 2]
    assert len(with_neighbors(index, [middle.chunk_id], 2, budget=3)) == 3  # hit, -1, +1
    # naive with neighbours: the budget (top_k) holds the hits and their neighbours
    task = ds.tasks[0]
    pred = NaiveRAG("naive", _ctx(OfflineModel(), ds, index, neighbors=1)).predict(task, "s")
    assert len(pred.context_chunk_ids) == 5 and len(set(pred.context_chunk_ids)) == 5
    assert all(index.by_id[c].doc_id in task.doc_ids for c in pred.context_chunk_ids)
    plain = NaiveRAG("naive", _ctx(OfflineModel(), ds, index)).predict(task, "s")
    assert pred.context_chunk_ids != plain.context_chunk_ids
    steps = [s.name for s in pred.trace if isinstance(s, Retrieval)]
    assert steps == ["semantic_search", "neighbors"]
    assert NaiveRAG.ranking(pred)[:5] == pred.context_chunk_ids


def test_contextual_headers_change_the_index_key_and_what_is_indexed(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "mini", filler=20)  # small: it is embedded twice
    cfg = make_cfg(f"dataset.root={root}")
    headed = make_cfg(f"dataset.root={root}", "retrieval.contextual_headers=true")
    ds = load_dataset(cfg.dataset, ROOT)
    assert index_key(ds.corpus, headed.retrieval) != index_key(ds.corpus, cfg.retrieval)
    index = load_or_build_index(ds.corpus, cfg.retrieval, tmp_path)
    with_headers = load_or_build_index(ds.corpus, headed.retrieval, tmp_path)
    assert with_headers.contextual_headers and not index.contextual_headers
    chunk = with_headers.chunks[0]
    assert embedded_texts([chunk], True)[0] == f"{chunk.header} {chunk.lines[0]}"
    assert embedded_texts([chunk], False)[0] == chunk.lines[0]
    # BM25 sees the header too: the ticker (only in headers) now finds the company's chunks
    ticker = ds.corpus.documents[ds.tasks[0].doc_ids[0]].ticker
    assert not any(ticker.lower() in c.body.lower() for c in index.chunks_of(
        list(ds.tasks[0].doc_ids)))
    assert bm25_for(index).search(ticker, 3) == []
    found = bm25_for(with_headers).search(ticker, 3)
    assert found and all(with_headers.chunks[p].doc_id == ds.tasks[0].doc_ids[0]
                         for p, _ in found)
    # a reloaded index remembers what it embedded
    assert load_or_build_index(ds.corpus, headed.retrieval, tmp_path).contextual_headers


def test_rerank_and_hyde_are_priced_traced_and_cached(sample, tmp_path):
    _, ds, index = sample
    task = ds.tasks[0]
    passage = "A hypothetical passage: revenue rose 14 percent."
    query = hyde_query(task.question, passage)
    pool = [h.chunk_id for h in rank_chunks(index, query, 4, list(task.doc_ids), Method())]
    script = [passage, "\n".join(reversed(pool)), "the answer"]
    settings = {"hyde": True, "rerank": True, "rerank_candidates": 4}

    def run():
        model = CachedModel(ScriptedModel(list(script)), tmp_path)
        return NaiveRAG("naive", _ctx(model, ds, index, **settings)).predict(task, "s")

    pred = run()
    calls = [s for s in pred.trace if isinstance(s, ModelCall)]
    assert len(calls) == 3 and not any(c.cached for c in calls)  # HyDE, rerank, answer
    assert all(c.cost_usd > 0 for c in calls)
    assert pred.cost_usd == pytest.approx(sum(c.cost_usd for c in calls))
    searched = next(s for s in pred.trace if isinstance(s, Retrieval))
    assert "hypothetical passage" in searched.arguments["query"]
    assert NaiveRAG.ranking(pred)[:4] == list(reversed(searched.result_chunk_ids[:4]))
    assert pred.context_chunk_ids[0] == searched.result_chunk_ids[3]
    again = run()  # same requests: served by the response cache, free
    assert all(c.cached for c in again.trace if isinstance(c, ModelCall))
    assert again.cost_usd == 0 and again.cost_usd_uncached == pytest.approx(pred.cost_usd)
    assert again.context_chunk_ids == pred.context_chunk_ids


def test_offline_stand_ins_for_rerank_and_hyde_are_deterministic(sample):
    _, ds, index = sample
    # the offline reranker orders by the question's own words: this one names a few that
    # only some chunks hold
    task = replace(ds.tasks[2], question="What did the company say about its dividend, "
                   "share repurchases and free cash flow?")
    runs = [NaiveRAG("naive", _ctx(OfflineModel(), ds, index, hyde=True, rerank=True))
            .predict(task, "s") for _ in range(2)]
    assert runs[0].context_chunk_ids == runs[1].context_chunk_ids
    assert runs[0].predicted == runs[1].predicted
    first_stage = next(s for s in runs[0].trace if isinstance(s, Retrieval))
    reranked = NaiveRAG.ranking(runs[0])
    assert sorted(reranked[:20]) == sorted(first_stage.result_chunk_ids[:20])
    assert reranked != first_stage.result_chunk_ids[:len(reranked)]  # it did reorder
    assert sum(isinstance(s, ModelCall) for s in runs[0].trace) == 3
    assert runs[0].input_tokens > runs[0].trace[-1].usage["input_tokens"]  # the extra calls count


@pytest.mark.parametrize("method", ["dense", "bm25", "hybrid"])
def test_one_context_budget_for_naive_and_arag(sample, method):
    _, ds, index = sample
    for task in ds.tasks:
        ctx = _ctx(OfflineModel(), ds, index, method=Method(method))
        naive = make_system("naive", "naive", ctx).predict(task, "s")
        arag = make_system("arag", "arag", ctx).predict(task, "s")
        assert len(naive.context_chunk_ids) == 5
        assert 0 < len(arag.context_chunk_ids) <= 5
    # the budget can be raised for both at once; an explicit offline cap stays below it
    wide = _ctx(OfflineModel(), ds, index, context_budget=7)
    assert len(make_system("arag", "arag", wide).predict(ds.tasks[0], "s")
               .context_chunk_ids) == 7
    capped = make_system("arag", "arag", _ctx(OfflineModel(max_chunks_read=3), ds, index))
    assert len(capped.predict(ds.tasks[0], "s").context_chunk_ids) == 3


def test_options_are_validated_naming_the_key(make_cfg):
    with pytest.raises(ConfigCompositionException, match="retrieval.method"):
        make_cfg("retrieval.method=sparse")
    with pytest.raises(ConfigCompositionException, match="retrieval.rerank"):
        make_cfg("retrieval.rerank=colbert")
    for override, key in (("retrieval.neighbors=-1", "retrieval.neighbors"),
                          ("retrieval.fusion_k=0", "retrieval.fusion_k"),
                          ("retrieval.dense_weight=1.5", "retrieval.dense_weight"),
                          ("retrieval.context_budget=0", "retrieval.context_budget")):
        with pytest.raises(ConfigError, match=rf"{key}=.* Fix: {key}="):
            validate_config(make_cfg(override))


def test_query_options_change_the_predictions_not_the_index(make_cfg):
    base = make_cfg()
    cfgs = [make_cfg(o) for o in ("retrieval.method=bm25", "retrieval.neighbors=1",
                                  "retrieval.rerank=model", "retrieval.hyde=true",
                                  "retrieval.context_budget=8")]
    ds = load_dataset(base.dataset, ROOT)
    hashes = {predictions_hash(c) for c in cfgs} | {predictions_hash(base)}
    assert len(hashes) == len(cfgs) + 1
    assert {index_key(ds.corpus, c.retrieval) for c in cfgs} == {index_key(ds.corpus,
                                                                          base.retrieval)}


def test_min_score_drops_weak_hits_from_the_ranking(sample):
    _, ds, index = sample
    task = ds.tasks[0]
    hits = rank_chunks(index, task.question, 10, list(task.doc_ids), Method())
    cut = (hits[2].score + hits[3].score) / 2  # between the third and the fourth hit
    kept = rank_chunks(index, task.question, 10, list(task.doc_ids), Method(min_score=cut))
    assert kept == hits[:3]
    plain = NaiveRAG("naive", _ctx(OfflineModel(), ds, index)).predict(task, "s")
    strict = NaiveRAG("naive", _ctx(OfflineModel(), ds, index, method=Method(min_score=cut))
                      ).predict(task, "s")
    assert NaiveRAG.ranking(strict) == NaiveRAG.ranking(plain)[:3]
    assert strict.context_chunk_ids == plain.context_chunk_ids[:3]  # no weak padding


def test_small_to_big_brings_in_each_hits_parent(sample):
    from arag.retrieval.search import parent_groups

    cfg, ds, index = sample
    task = ds.tasks[0]
    size = cfg.retrieval.chunk_size * 3
    groups = parent_groups(index, size)
    assert all(len({index.by_id[c].doc_id for c in g}) == 1 for g in groups.values())
    assert max(len(g) for g in groups.values()) > 1
    plain = NaiveRAG("naive", _ctx(OfflineModel(), ds, index)).predict(task, "s")
    pred = NaiveRAG("naive", _ctx(OfflineModel(), ds, index, parent_chunk_size=size)
                    ).predict(task, "s")
    top = NaiveRAG.ranking(plain)[0]
    assert pred.context_chunk_ids[:len(groups[top])] == groups[top]  # the best hit's parent
    assert len(pred.context_chunk_ids) == 5  # within the same budget
    assert NaiveRAG.ranking(pred) != NaiveRAG.ranking(plain)
    assert [s.name for s in pred.trace if isinstance(s, Retrieval)][-1] == "parents"


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A one-layer BERT cross-encoder with random weights, saved where a user's would be."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from arag.retrieval import packaged_minilm_path

    folder = tmp_path_factory.mktemp("cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(packaged_minilm_path())
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, num_labels=1)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_a_local_cross_encoder_reorders_the_candidates(sample, tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    _, ds, index = sample
    task = ds.tasks[1]
    plain = NaiveRAG("naive", _ctx(OfflineModel(), ds, index)).predict(task, "s")
    pred = NaiveRAG("naive", _ctx(OfflineModel(), ds, index, rerank_candidates=8,
                                  cross_encoder_path=tiny_cross_encoder)).predict(task, "s")
    first = NaiveRAG.ranking(plain)[:8]
    scores = CrossEncoder(tiny_cross_encoder).predict(
        [(task.question, index.by_id[c].text) for c in first], show_progress_bar=False)
    expected = [c for _, c in sorted(zip(-scores, first, strict=True), key=lambda p: p[0])]
    assert NaiveRAG.ranking(pred)[:8] == expected != first
    assert pred.context_chunk_ids == expected[:5]
    step = [s for s in pred.trace if isinstance(s, Retrieval)][-1]
    assert step.name == "cross_encoder_rerank" and step.arguments["candidates"] == 8


def test_retrieval_options_are_swept_keys(make_cfg, tiny_cross_encoder, tmp_path):
    base = make_cfg()
    swept = [make_cfg(o) for o in ("retrieval.min_score=0.3", "retrieval.parent_chunk_size=400",
                                   "retrieval.rerank=cross_encoder",
                                   f"retrieval.reranker_path={tiny_cross_encoder}")]
    assert len({predictions_hash(c) for c in [base, *swept]}) == 5
    settings = RetrievalSettings.from_config(make_cfg(
        "retrieval.rerank=cross_encoder", f"retrieval.reranker_path={tiny_cross_encoder}",
        "retrieval.min_score=0.3", "retrieval.parent_chunk_size=400").retrieval)
    assert (settings.cross_encoder_path, settings.method.min_score,
            settings.parent_chunk_size) == (tiny_cross_encoder, 0.3, 400)
    for overrides, key in ((["retrieval.rerank=cross_encoder"], "retrieval.reranker_path"),
                           (["retrieval.rerank=cross_encoder",
                             f"retrieval.reranker_path={tmp_path}/nowhere"],
                            "retrieval.reranker_path"),
                           (["retrieval.parent_chunk_size=100"], "retrieval.parent_chunk_size")):
        with pytest.raises(ConfigError, match=rf"{key}=.* Fix: {key}="):
            validate_config(make_cfg(*overrides))


class ContextWriter(ScriptedModel):
    """Writes a context naming a made-up project for one chunk, a plain one for the rest;
    counts its calls."""

    def __init__(self, special: str):
        super().__init__([])
        self.special, self.calls = special, 0

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        from arag.llm.base import Completion, Usage

        self.calls += 1
        text = ("This passage covers the Zephyrine expansion programme."
                if self.special in messages[-1]["content"] else "A passage of the call.")
        return Completion([{"type": "text", "text": text}], "end_turn", Usage(900, 12),
                          "writer")


def test_llm_chunk_context_is_indexed_cached_and_priced(sample, tmp_path):
    from arag.retrieval.chunk_context import context_requests, write_contexts
    from runners import dryrun

    cfg, ds, index = sample
    chunks = index.chunks_of([ds.tasks[0].doc_ids[0]])
    every_body = "\n".join(c.body for c in index.chunks)
    target = next(c for c in chunks[len(chunks) // 2:] if every_body.count(c.lines[0]) == 1)
    writer = ContextWriter(target.lines[0])
    cached = CachedModel(writer, tmp_path / "responses")
    contexts = write_contexts(cached, ds.corpus, index.chunks, concurrency=2)
    assert writer.calls == len(index.chunks) and "Zephyrine" in contexts[target.chunk_id]
    assert write_contexts(cached, ds.corpus, index.chunks) == contexts  # from the cache
    assert writer.calls == len(index.chunks)
    with_context = load_or_build_index(ds.corpus, cfg.retrieval, tmp_path / "c",
                                       contexts=contexts)
    assert with_context.key != index.key  # the contexts are part of the index key
    doc = [target.doc_id]
    assert rank_chunks(index, "Zephyrine", 5, doc, Method("bm25")) == []
    found = rank_chunks(with_context, "Zephyrine", 5, doc, Method("bm25"))
    assert [h.chunk_id for h in found] == [target.chunk_id]
    dense = [h.chunk_id for h in rank_chunks(with_context, "Zephyrine", 3, doc, Method())]
    assert dense[0] == target.chunk_id != rank_chunks(index, "Zephyrine", 1, doc)[0].chunk_id
    requests = context_requests(ds.corpus, index.chunks)
    priced = compose_cfg(store_overrides(tmp_path) + ["model=claude-haiku-4-5"]).model
    est = dryrun.estimate_requests("contexts", requests, priced, tmp_path / "responses")
    assert est.n_calls == len(index.chunks) and est.cost_usd > 0
    # the document goes in the system prompt: one prompt cache entry per document
    assert requests[target.chunk_id]["system"].count(target.lines[0]) == 1
