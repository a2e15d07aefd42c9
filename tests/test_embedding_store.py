"""The sentence embedding store, token-length batching and the embedder's precision.

Real MiniLM, real FAISS: a second index over the same sentences embeds nothing, a damaged
shard is never read back as a vector, and a sentence's vector does not depend on the batch
it was embedded in.
"""

from __future__ import annotations

import numpy as np
import pytest

from arag.datasets import load_dataset
from arag.retrieval import (
    EmbeddingStore,
    embed_sentences,
    get_embedder,
    index_key,
    load_or_build_index,
    text_key,
)
from arag.retrieval import embedder as embedder_module
from arag.retrieval.embedder import Embedder, check_precision
from runners.validation import ConfigError, validate_config
from tests.conftest import ROOT, write_mini_dataset


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder(None)


def _dataset(make_cfg, root, *overrides: str, n_docs: int = 2):
    cfg = make_cfg(f"dataset.root={write_mini_dataset(root, n_docs)}", *overrides,
                   fresh_cache=True)
    return cfg, load_dataset(cfg.dataset, ROOT)


def _shards(cache_dir) -> list:
    return sorted((cache_dir / "embeddings").glob("*/*.shard"))


def test_a_second_index_over_the_same_sentences_embeds_nothing(make_cfg, tmp_path):
    cfg, ds = _dataset(make_cfg, tmp_path / "mini")
    first = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    distinct = len({line for d in ds.corpus.documents.values() for line in d.lines})
    assert (first.stats.sentences_embedded, first.stats.sentences_reused) == (distinct, 0)
    assert first.stats.embed_seconds > 0 and len(_shards(tmp_path / "cache")) == 1
    # another chunking is another index, but every sentence is in the store
    rechunked = make_cfg(f"dataset.root={tmp_path / 'mini'}", "retrieval.chunk_size=30")
    second = load_or_build_index(ds.corpus, rechunked.retrieval, cfg.cache.dir)
    assert second.key != first.key and not second.loaded_from_cache
    assert (second.stats.sentences_embedded, second.stats.sentences_reused) == (0, distinct)
    assert second.stats.embed_seconds == 0.0 and len(_shards(tmp_path / "cache")) == 1
    # assembled from stored vectors: the same vectors a build from scratch computes
    alone = load_or_build_index(ds.corpus, rechunked.retrieval, cfg.cache.dir, mode="off")
    assert alone.stats.sentences_embedded == distinct
    assert np.array_equal(second.faiss.reconstruct_n(0, second.n_vectors),
                          alone.faiss.reconstruct_n(0, alone.n_vectors))
    q = "What were adjusted earnings per share?"
    assert second.semantic_search(q, 3) == alone.semantic_search(q, 3)
    # loaded from the index cache: nothing embedded, every sentence reused
    again = load_or_build_index(ds.corpus, rechunked.retrieval, cfg.cache.dir)
    assert again.loaded_from_cache
    assert again.stats.metrics() == {"index_sentences_embedded": 0.0,
                                     "index_sentences_reused": float(distinct),
                                     "index_embed_seconds": 0.0}


def test_more_documents_embed_only_the_new_sentences(make_cfg, tmp_path):
    cfg, small = _dataset(make_cfg, tmp_path / "small", n_docs=1)
    load_or_build_index(small.corpus, cfg.retrieval, cfg.cache.dir)
    cfg, large = _dataset(make_cfg, tmp_path / "large", n_docs=3)  # the same cache.dir
    grown = load_or_build_index(large.corpus, cfg.retrieval, cfg.cache.dir)
    old = {line for d in small.corpus.documents.values() for line in d.lines}
    every = {line for d in large.corpus.documents.values() for line in d.lines}
    assert grown.stats.sentences_reused == len(old & every) > 0
    assert grown.stats.sentences_embedded == len(every - old) > 0


@pytest.mark.parametrize("damage", ["truncate", "flip_a_vector_byte", "garbage"])
def test_a_damaged_shard_is_ignored_and_its_sentences_embedded_again(minilm, tmp_path, caplog,
                                                                    damage):
    sentences = ["Revenue rose 8 percent to $452 million.", "We expect margins to expand.",
                 "Free cash flow was $1.2 billion."]
    store = EmbeddingStore(tmp_path / "emb", minilm.dim)
    truth, _ = embed_sentences(sentences, minilm, store)
    shard = next((tmp_path / "emb").glob("*.shard"))
    data = bytearray(shard.read_bytes())
    if damage == "truncate":  # as a write cut short would leave it, were it not renamed last
        data = data[:len(data) - 700]
    elif damage == "flip_a_vector_byte":
        data[-5] ^= 0xFF
    else:
        data = bytearray(b"\x00" * len(data))
    shard.write_bytes(bytes(data))
    fresh = EmbeddingStore(tmp_path / "emb", minilm.dim)  # as another process sees it
    from arag.retrieval import store as store_module
    store_module._SHARDS.clear()  # forget what this process read: read the file again
    assert fresh.lookup([text_key(s) for s in sentences]) == {}
    assert "damaged shard" in caplog.text and not shard.exists()
    again, stats = embed_sentences(sentences, minilm, fresh)
    assert stats.sentences_embedded == 3 and np.array_equal(again, truth)
    store_module._SHARDS.clear()
    assert set(fresh.lookup([text_key(s) for s in sentences])) == {text_key(s) for s in sentences}


def test_an_unfinished_write_is_never_read(minilm, tmp_path):
    store = EmbeddingStore(tmp_path / "emb", minilm.dim)
    # a writer killed before its rename leaves only a temporary file
    (tmp_path / "emb").mkdir()
    (tmp_path / "emb" / ".abc123.tmp").write_bytes(b"ARAGEMB1 half a shard")
    assert store.lookup([text_key("Revenue rose.")]) == {}
    _, stats = embed_sentences(["Revenue rose."], minilm, store)
    assert stats.sentences_embedded == 1


def test_token_batches_give_the_vectors_of_the_plain_path_bit_for_bit(minilm):
    """Each vector equals sentence-transformers' own encode of that sentence in a large
    unpadded batch, whichever sentences share its batch and whatever the batch size."""
    sentences = ["Revenue rose 8 percent.", "Margins fell.", "EPS was $1.10, up from $0.98.",
                 "Margins rose.", "We expect full year revenue of $1.80 billion to $1.85 billion.",
                 "Cash flow rose 12 percent.", "Margins fell."]
    lengths = minilm.token_lengths(sentences)
    assert len(set(lengths)) > 1 and min(lengths) * 2 < 16  # several batches, some tiny
    ours = minilm.encode(sentences)
    plain = minilm._model
    for i, text in enumerate(sentences):
        reference = plain.encode([text] * 64, batch_size=64, normalize_embeddings=True)[0]
        assert np.array_equal(ours[i], reference), text
    small = Embedder(minilm.path, batch_size=2)
    assert np.array_equal(small.encode(sentences[::-1]), ours[::-1])
    for i in (2, 3):  # alone in its batch
        assert np.array_equal(minilm.encode(sentences[i:i + 1])[0], ours[i])


def test_bf16_is_refused_with_the_key_and_the_fix_where_the_cpu_lacks_it(monkeypatch, make_cfg):
    monkeypatch.setattr(embedder_module, "cpu_has_bf16", lambda: False)
    with pytest.raises(ValueError, match=r"retrieval\.embedder\.precision=bf16 needs a CPU with "
                                         r"bfloat16 .*Fix: retrieval\.embedder\.precision=fp32"):
        check_precision("bf16")
    with pytest.raises(ValueError, match="bfloat16"):
        Embedder("unused-path", precision="bf16")
    cfg = make_cfg("retrieval.embedder.precision=bf16")
    with pytest.raises(ConfigError, match=r"retrieval\.embedder\.precision=bf16 needs"):
        validate_config(cfg)
    validate_config(make_cfg())  # fp32 runs anywhere


def test_precision_is_part_of_the_index_key_and_the_store_identity(make_cfg, tmp_path, minilm,
                                                                  monkeypatch):
    cfg, ds = _dataset(make_cfg, tmp_path / "mini")
    bf16 = make_cfg(f"dataset.root={tmp_path / 'mini'}", "retrieval.embedder.precision=bf16")
    assert index_key(ds.corpus, bf16.retrieval) != index_key(ds.corpus, cfg.retrieval)
    monkeypatch.setattr(embedder_module, "cpu_has_bf16", lambda: True)  # loading needs no bf16
    other = Embedder(minilm.path, precision="bf16")
    assert other.identity != minilm.identity
    assert minilm.identity.endswith(minilm.identity.split("-fp32-")[1]) and "-fp32-" in minilm.identity


@pytest.mark.skipif(not embedder_module.cpu_has_bf16(), reason="this CPU has no bfloat16")
def test_bf16_vectors_are_close_to_fp32_and_stored_apart(make_cfg, tmp_path, minilm):
    cfg, ds = _dataset(make_cfg, tmp_path / "mini", "retrieval.embedder.precision=bf16")
    index = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    assert index.embedder.precision == "bf16" and index.stats.sentences_reused == 0
    sentences = [line for c in index.chunks for line in c.lines]
    full = minilm.encode(sentences)
    cos = (index.faiss.reconstruct_n(0, index.n_vectors) * full).sum(axis=1)
    assert cos.min() > 0.999
    assert len({p.parent.name for p in _shards(tmp_path / "cache")}) == 1


def test_vectors_are_the_same_bits_on_one_thread_or_two(minilm):
    """``fit_threads`` may give torch fewer threads on a busy machine: the stored vectors
    must not depend on it."""
    import torch

    texts = ["Revenue rose 8% to $1.2 billion.", "We expect margins to expand next year.",
             "Free cash flow was $310 million.", "Guidance is unchanged."]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = minilm.encode(texts)
        torch.set_num_threads(2)
        two = minilm.encode(texts)
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(one, two)


def test_torch_gets_the_cores_that_are_not_busy_unless_told(monkeypatch):
    import os

    import torch

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (7.9, 6.0, 5.0))
    try:
        torch.set_num_threads(2)
        assert embedder_module.fit_threads() == 1 == torch.get_num_threads()
        monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.1, 0.1))
        torch.set_num_threads(2)
        assert embedder_module.fit_threads() == 2  # a quiet machine: every core
        monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 1.0, 0.5))
        assert embedder_module.fit_threads() == 2  # the load of this process itself
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        monkeypatch.setattr(os, "getloadavg", lambda: (7.9, 6.0, 5.0))
        assert embedder_module.fit_threads() == 2  # the user's setting is kept
    finally:
        torch.set_num_threads(before)
