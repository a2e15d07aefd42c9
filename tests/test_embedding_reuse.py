"""End to end: each ECTSum sentence is embedded once, across limits and chunkings.

Through ``run.py`` on the real val split: growing ``dataset.limit`` embeds only the new
documents' sentences, and a ``retrieval.chunk_size`` sweep over them embeds nothing; the
runs' MLflow metrics say so.
"""

from __future__ import annotations

import pytest

from arag.datasets import load_dataset
from tests.conftest import ROOT, all_runs, compose_cfg, run_cli
from tests.test_ectsum import ECTSUM, needs_data

pytestmark = [pytest.mark.slow, needs_data]
BASE = ("system=naive", "dataset=ectsum", "dataset.split=val", f"dataset.root={ECTSUM}")


def _sentences(limit: int) -> set[str]:
    cfg = compose_cfg(["dataset=ectsum", "dataset.split=val", f"dataset.limit={limit}",
                       f"dataset.root={ECTSUM}"])
    corpus = load_dataset(cfg.dataset, ROOT).corpus
    return {line for doc in corpus.documents.values() for line in doc.lines}


def _index_metrics(tmp_path) -> dict[tuple[str, str], dict[str, float]]:
    """(dataset.limit, retrieval.chunk_size) -> the index_* metrics of that child run."""
    return {(r.data.params["dataset.limit"], r.data.params["retrieval.chunk_size"]):
            {k: v for k, v in r.data.metrics.items() if k.startswith("index_")}
            for r in all_runs(tmp_path) if r.data.tags.get("role") != "sweep_parent"}


def test_a_larger_limit_embeds_only_new_sentences_and_a_chunking_sweep_none(tmp_path):
    for overrides in (["dataset.limit=3"], ["dataset.limit=6"],
                      ["dataset.limit=6", "retrieval.chunk_size=60,240"]):
        done = run_cli(tmp_path, *BASE, *overrides)
        assert done.returncode == 0, done.stderr[-3000:]
    first, grown = _sentences(3), _sentences(6)
    assert first < grown
    runs = _index_metrics(tmp_path)
    assert set(runs) == {("3", "120"), ("6", "120"), ("6", "60"), ("6", "240")}
    assert runs["3", "120"]["index_sentences_embedded"] == len(first)
    assert runs["3", "120"]["index_sentences_reused"] == 0
    assert runs["3", "120"]["index_embed_seconds"] > 0
    assert runs["6", "120"]["index_sentences_embedded"] == len(grown - first)
    assert runs["6", "120"]["index_sentences_reused"] == len(first)
    for chunk_size in ("60", "240"):
        assert runs["6", chunk_size] == {"index_sentences_embedded": 0.0,
                                         "index_sentences_reused": float(len(grown)),
                                         "index_embed_seconds": 0.0}
