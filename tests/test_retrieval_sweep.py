"""A fair fight, end to end through `run.py -m`: ranking metrics for every system that ranks,
one context budget, and retrieval.method swept like any other key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED, client_for, run_cli

pytestmark = pytest.mark.slow

# at the context budget's depth (5), which both rankers reach; deeper, a ranking is scored
# only where the system ranked that far (A-RAG ranks what it read)
RANKING = ("recall_at_5_mean", "mrr_at_5_mean", "ndcg_at_5_mean")
CONTEXT = ("context_chunks_mean", "context_tokens_mean")


def _children(tmp: Path, experiment: str, sweep: int = 0):
    client = client_for(tmp)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    parents = [r for r in runs if r.data.tags.get("role") == "sweep_parent"]
    parent = parents[sweep]
    return parent, [r for r in runs
                    if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def test_arag_and_naive_are_ranked_on_the_same_context_budget(sample_sweep):
    tmp, first, *_ = sample_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    parent, children = _children(tmp, "sample")
    by_system = {c.data.tags["system"]: c.data.metrics for c in children}
    arag, naive, stuffing = by_system["arag"], by_system["naive"], by_system["stuffing"]
    for m in (arag, naive):
        assert all(key in m for key in RANKING + CONTEXT)
    # one budget: retrieval.top_k (5) chunks; the agent may read fewer, never more
    assert naive["context_chunks_mean"] == 5.0
    assert arag["context_chunks_mean"] == naive["context_chunks_mean"]
    assert 0 < arag["context_tokens_mean"]
    # stuffing has no ranking but its context is measured too: whole documents
    assert "recall_at_5_mean" not in stuffing
    assert stuffing["context_chunks_mean"] > naive["context_chunks_mean"]
    assert stuffing["context_tokens_mean"] > naive["context_tokens_mean"]
    report = Path(client_for(tmp).download_artifacts(parent.info.run_id, "report.md",
                                                     str(tmp / "budget")))
    assert "context chunks" in report.read_text() and "context tokens" in report.read_text()


@pytest.mark.skipif(not (SHARED / "ectsum" / "codes").exists(),
                    reason="ECTSum is not in ../shared/datasets/ectsum")
def test_retrieval_methods_sweep_on_ectsum_val(tmp_path, shared_cache):
    result = run_cli(tmp_path, "system=naive", "dataset=ectsum", "dataset.split=val",
                     "dataset.limit=6", f"dataset.root={SHARED / 'ectsum'}",
                     "retrieval.method=dense,bm25,hybrid", cache=shared_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    _, children = _children(tmp_path, "ectsum")
    assert len(children) == 3 and all(c.info.status == "FINISHED" for c in children)
    methods = {c.data.params["retrieval.method"]: c.data.metrics for c in children}
    assert sorted(methods) == ["bm25", "dense", "hybrid"]
    for m in methods.values():
        assert all(key in m for key in RANKING + CONTEXT)
        assert m["context_chunks_mean"] == 5.0
    # the methods rank differently: their ranking metrics are not all the same
    assert len({tuple(m[key] for key in RANKING) for m in methods.values()}) > 1
