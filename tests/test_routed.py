"""``system=routed``: a rule or a cascade of conf/system members, each task answered exactly
as the member it routes to would answer it alone (arag/systems/routed.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from arag.llm import make_model
from arag.records import Prediction
from metrics import SCORERS
from metrics.base import ScorerEnv
from runners.evaluate import evaluate
from runners.job import build_system, cached, prepare
from runners.settings import read
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import write_mini_dataset

RULE = "system.rule={feature: document_tokens, threshold: %d, below: stuffing, above: naive}"


def lengths_dataset(root: Path) -> tuple[Path, int]:
    """Four transcripts: two short, two with 300 more lines (after the gold ones); and a
    threshold between their lengths in tokens."""
    write_mini_dataset(root, n_docs=4)
    docs = sorted((root / "documents").glob("*.txt"))
    for doc in docs[2:]:
        extra = "".join(f"Our region {i} team grew its customer base steadily.\n"
                        for i in range(300))
        doc.write_text(doc.read_text() + extra)
    sizes = [len(d.read_text()) // 4 for d in docs]
    return root, (max(sizes[:2]) + min(sizes[2:])) // 2


def system(make_cfg, *overrides: str, model=None):
    cfg = make_cfg(*overrides)
    job = prepare(read(cfg))
    return job, build_system(job, model or make_model(cfg.model))


def test_offline_a_rule_answers_each_task_exactly_as_its_member_alone(make_cfg, tmp_path):
    root, threshold = lengths_dataset(tmp_path / "mini")
    data = [f"dataset.root={root}", "metrics.scorers=[retrieval,length]"]
    job, routed = system(make_cfg, "system=routed", RULE % threshold, *data)
    assert job.system_class.retrieves and job._index is not None  # naive retrieves: index loaded
    alone = {name: system(make_cfg, f"system={name}", *data)[1] for name in ("stuffing", "naive")}
    preds = []
    for k, task in enumerate(job.dataset.tasks):
        pred = routed.predict(task, "mini")
        member = "stuffing" if k < 2 else "naive"
        own = alone[member].predict(task, "mini")
        assert pred.routed_to == member and pred.system == "routed"
        assert ("<" if k < 2 else ">=") in (pred.route_reason or "")
        assert (pred.predicted, pred.retrieved_chunk_ids, pred.context_chunk_ids, pred.loops) == (
            own.predicted, own.retrieved_chunk_ids, own.context_chunk_ids, own.loops)
        assert Prediction.from_dict(json.loads(pred.to_json())) == pred
        preds.append(pred)
    # retrieval is scored where naive answered, null with a reason where stuffing did
    retrieval = SCORERS.get("retrieval").from_config(None, ScorerEnv())
    records = evaluate(preds, {t.id: t for t in job.dataset.tasks}, job.dataset.corpus,
                       job.index_loader().chunks, [retrieval], 50, job.system_class)
    assert [r["retrieval_recall"] is None for r in records] == [True, True, False, False]
    assert "does not retrieve" in records[0]["null_reasons"]["retrieval_recall"]
    assert [r["routed_to"] for r in records] == ["stuffing", "stuffing", "naive", "naive"]


def test_offline_a_cascade_escalates_where_its_first_member_declines(make_cfg, tmp_path):
    root, threshold = lengths_dataset(tmp_path / "mini")
    # a window the long transcripts do not fit: stuffing skips them, naive answers
    data = [f"dataset.root={root}", "metrics.scorers=[length]",
            f"model.context_limit={threshold + 1500}"]
    job, routed = system(make_cfg, "system=routed", "system.cascade=[stuffing,naive]", *data)
    alone = {name: system(make_cfg, f"system={name}", *data)[1] for name in ("stuffing", "naive")}
    for k, task in enumerate(job.dataset.tasks):
        pred = routed.predict(task, "mini")
        first = alone["stuffing"].predict(task, "mini")
        if k < 2:
            assert not first.skipped and pred.routed_to == "stuffing"
            assert pred.predicted == first.predicted
        else:
            assert first.skipped and pred.routed_to == "naive"
            assert "stuffing declined (skipped: prompt of ~" in (pred.route_reason or "")
            assert pred.predicted == alone["naive"].predict(task, "mini").predicted


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")


def _requests(fake: FakeAnthropic) -> Counter:
    return Counter(json.dumps(r["json"], sort_keys=True) for r in fake.requests if r["json"])


@pytest.mark.slow  # ~20 s: three systems over four tasks through the real SDK
def test_against_claude_a_rule_makes_only_its_members_requests_and_a_sweeps_cache_answers_it(
        make_cfg, tmp_path, key):
    root, threshold = lengths_dataset(tmp_path / "mini")
    with FakeAnthropic() as fake:
        data = [f"dataset.root={root}", "metrics.scorers=[length]", "model=claude-haiku-4-5",
                f"model.base_url={fake.url}", "model.max_retries=0",
                f"cache.dir={tmp_path / 'cache'}"]
        job, routed = system(make_cfg, "system=routed", "system.rule={feature: document_tokens, "
                             f"threshold: {threshold}, below: stuffing, above: arag}}", *data,
                             "cache.mode=off")
        tasks = job.dataset.tasks
        preds = [routed.predict(t, "mini") for t in tasks]
        asked = _requests(fake)
        fake.requests.clear()
        costs = {}
        for name, mine in (("stuffing", tasks[:2]), ("arag", tasks[2:])):
            cfg = make_cfg(f"system={name}", *data, "cache.mode=off")
            member = build_system(prepare(read(cfg)), make_model(cfg.model))
            costs.update({t.id: member.predict(t, "mini").cost_usd_uncached for t in mine})
        assert asked == _requests(fake)  # the same requests, no more
        assert {p.id: p.cost_usd_uncached for p in preds} == costs and all(costs.values())
        # after a full sweep (every member on every task), the cache answers the routed run
        fake.requests.clear()
        for name in ("stuffing", "arag"):
            cfg = make_cfg(f"system={name}", *data)
            member = build_system(prepare(read(cfg)), cached(make_model(cfg.model), cfg.cache))
            for t in tasks:
                member.predict(t, "mini")
        fake.requests.clear()
        cfg = make_cfg("system=routed", "system.rule={feature: document_tokens, "
                       f"threshold: {threshold}, below: stuffing, above: arag}}", *data)
        again = build_system(prepare(read(cfg)), cached(make_model(cfg.model), cfg.cache))
        replayed = [again.predict(t, "mini") for t in tasks]
        assert not fake.requests
        assert all("answered from the response cache" in (p.route_reason or "") for p in replayed)
        # the uncached cost is what the calls would cost: a cached routed run is not free
        assert [p.cost_usd_uncached for p in replayed] == [costs[t.id] for t in tasks]
        assert all(p.cost_usd == 0 for p in replayed)


@pytest.mark.slow  # ~50 s on the shared machine: two members over four tasks through the SDK
def test_against_claude_a_cascade_escalates_a_refusal_and_costs_both_calls(make_cfg, tmp_path,
                                                                          key):
    """Stuffing's model refuses the long transcripts: the cascade asks naive there, and the
    task costs the refused call plus naive's; where stuffing answers, naive is never asked."""
    from tests.anthropic_fake import text_reply

    root, threshold = lengths_dataset(tmp_path / "mini")

    def handle(request: dict, n: int) -> dict:
        text = json.dumps(request["messages"])
        if "<document id=" in text and len(text) // 4 > threshold:
            return text_reply("I can't help with that request.", request, stop_reason="refusal")
        return text_reply("q3 revenue rose 8.1 percent to $452.1 million.", request)

    with FakeAnthropic(handle) as fake:
        data = [f"dataset.root={root}", "metrics.scorers=[length]", "model=claude-haiku-4-5",
                f"model.base_url={fake.url}", "model.max_retries=0", "cache.mode=off"]
        job, routed = system(make_cfg, "system=routed", "system.cascade=[stuffing,naive]", *data)
        alone = {name: system(make_cfg, f"system={name}", *data)[1] for name in ("stuffing", "naive")}
        for k, task in enumerate(job.dataset.tasks):
            fake.requests.clear()
            pred = routed.predict(task, "mini")
            sent = len(fake.requests)
            first = alone["stuffing"].predict(task, "mini")
            if k < 2:
                assert pred.routed_to == "stuffing" and sent == 1
                assert pred.cost_usd_uncached == first.cost_usd_uncached
            else:
                assert first.error_kind == "refusal" and pred.routed_to == "naive" and sent == 2
                assert "stuffing declined (the model refused" in (pred.route_reason or "")
                second = alone["naive"].predict(task, "mini")
                assert pred.predicted == second.predicted and pred.error is None
                assert pred.cost_usd_uncached == pytest.approx(
                    first.cost_usd_uncached + second.cost_usd_uncached)
                assert first.cost_usd_uncached > 0 and second.cost_usd_uncached > 0
