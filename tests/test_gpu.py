"""The GPU path (``retrieval.embedder.device``): ``auto`` runs the embedder and BERTScore on
the GPU where torch sees CUDA and on the CPU elsewhere, keeping the CPU's index keys and
store names there. Where a GPU exists, its vectors match the CPU's (cosine >= 0.999 for
every sentence of a validation sample, the same top-5 for every query) and so do BERTScore's
scores; where none does, those tests are skipped and say so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arag.datasets import load_dataset
from arag.retrieval import embedder as embedder_module
from arag.retrieval import index as index_module
from arag.retrieval import index_key
from arag.retrieval.embedder import get_embedder, packaged_minilm_path, resolve_device
from metrics.bertscore import bertscore_model
from tests.conftest import ROOT


def _cuda() -> bool:
    if resolve_device("auto") == "cpu":  # no NVIDIA driver: no torch import needed
        return False
    import torch

    return torch.cuda.is_available()


needs_gpu = pytest.mark.skipif(not _cuda(), reason=(
    "no CUDA GPU on this machine: GPU vectors vs the CPU's are checked where torch sees one "
    "(retrieval.embedder.device=auto|cuda)"))
SAMPLE = ROOT / "data" / "sample"


def _sentences() -> list[str]:
    """Every line of the shipped sample's documents: the validation sample."""
    return [line for doc in sorted((SAMPLE / "documents").glob("*.txt"))
            for line in doc.read_text(encoding="utf-8").splitlines() if line.strip()]


def _questions() -> list[str]:
    rows = [json.loads(line) for line in (SAMPLE / "tasks.jsonl").read_text().splitlines()]
    return [r["question"] for r in rows] + ["revenue guidance", "gross margin outlook",
                                            "share repurchases", "free cash flow"]


def test_auto_is_the_cpu_without_a_gpu_and_keeps_the_cpu_keys(make_cfg, monkeypatch):
    if _cuda():
        pytest.skip("this machine has a GPU: auto is the GPU here")
    cfg = make_cfg(f"dataset.root={SAMPLE}")
    assert cfg.retrieval.embedder.device == "auto" and cfg.retrieval.embedder.batch_size is None
    corpus = load_dataset(cfg.dataset, ROOT).corpus
    cpu = make_cfg(f"dataset.root={SAMPLE}", "retrieval.embedder.device=cpu")
    assert index_key(corpus, cfg.retrieval) == index_key(corpus, cpu.retrieval)
    embedder = get_embedder(None)
    assert (embedder.device, embedder.batch_size) == ("cpu", 64)
    assert "-cuda-" not in embedder.identity and embedder.identity.count("-") == 2
    assert bertscore_model(packaged_minilm_path(), 6).device == "cpu"
    # where auto finds a GPU, its vectors are kept apart from the CPU's
    monkeypatch.setattr(index_module, "resolve_device",
                        lambda device: "cuda" if device == "auto" else device)
    assert index_key(corpus, cfg.retrieval) != index_key(corpus, cpu.retrieval)
    assert embedder_module.batch_rows(None, "cuda:1") > embedder_module.batch_rows(None, "cpu")
    assert embedder_module.batch_rows(16, "cuda") == 16  # a configured batch is kept


@needs_gpu
def test_gpu_vectors_match_the_cpu_and_rank_the_same_top5():
    sentences, queries = _sentences(), _questions()
    on_cpu, on_gpu = get_embedder(None, device="cpu"), get_embedder(None, device="auto")
    assert on_gpu.device.startswith("cuda") and on_gpu.batch_size == 512
    cpu_vectors, gpu_vectors = on_cpu.encode(sentences), on_gpu.encode(sentences)
    cosine = (cpu_vectors * gpu_vectors).sum(axis=1)  # both L2-normalised
    assert cosine.min() >= 0.999, f"lowest cosine {cosine.min():.6f}"
    for query, q_cpu, q_gpu in zip(queries, on_cpu.encode(queries), on_gpu.encode(queries),
                                   strict=True):
        top_cpu = np.argsort(-(cpu_vectors @ q_cpu), kind="stable")[:5]
        top_gpu = np.argsort(-(gpu_vectors @ q_gpu), kind="stable")[:5]
        assert set(top_cpu) == set(top_gpu), query
    assert on_gpu.identity != on_cpu.identity  # stored apart


@needs_gpu
def test_bertscore_on_the_gpu_gives_the_cpus_scores():
    sentences = _sentences()
    cands, refs = sentences[:40], sentences[40:80]
    cpu = bertscore_model(packaged_minilm_path(), 6, "cpu").score(cands, refs)
    gpu_model = bertscore_model(packaged_minilm_path(), 6, "auto")
    assert gpu_model.device.startswith("cuda")
    gpu = gpu_model.score(cands, refs)
    assert np.allclose(np.array(cpu), np.array(gpu), atol=1e-4)
