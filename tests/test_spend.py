"""Spend is recorded as each paid call returns; a continued run's unchanged metrics are
not logged a second time."""

from __future__ import annotations

import pytest

from arag.llm import Prices
from arag.llm.cache import CachedModel, MeteredModel, SpendJournal
from arag.llm.scripted import ScriptedModel
from tests.conftest import client_for


def test_every_paid_call_is_journaled_as_it_returns_and_a_cached_one_is_not(tmp_path):
    journal = SpendJournal(tmp_path / "spend.jsonl")
    prices = Prices(input=3.0, output=15.0)
    model = MeteredModel(CachedModel(ScriptedModel(["one", "two"]), tmp_path / "cache"), prices,
                         journal)
    first = model.complete("s", [{"role": "user", "content": "a"}])
    lines = journal.path.read_text().splitlines()
    assert len(lines) == 1  # on disk before the caller gets the reply
    model.complete("s", [{"role": "user", "content": "b"}])
    model.complete("s", [{"role": "user", "content": "a"}])  # a cache hit: not paid
    assert len(journal.path.read_text().splitlines()) == 2
    assert journal.spend_total() == pytest.approx(model.cost_usd)
    assert model.cost_usd > prices.cost_usd(first.usage) > 0
    with open(journal.path, "a") as f:
        f.write('{"cost_usd": 1')  # torn by a kill: not a call that returned
    assert journal.spend_total() == pytest.approx(model.cost_usd)


def test_a_continued_run_logs_only_the_metrics_that_changed(tmp_path):
    from tracking import runs as track

    client = client_for(tmp_path)
    experiment = client.create_experiment("e", artifact_location=(tmp_path / "a").as_uri())
    run = client.create_run(experiment)
    tracker = track.RunTracker(client, run.info.run_id, experiment)
    tracker.log_metrics({"n_tasks": 6.0, "rouge2_f1_mean": 0.2})
    tracker.log_metrics({"n_tasks": 6.0, "rouge2_f1_mean": 0.25})  # the continued pass
    assert len(client.get_metric_history(run.info.run_id, "n_tasks")) == 1
    assert [m.value for m in client.get_metric_history(run.info.run_id, "rouge2_f1_mean")] == [
        0.2, 0.25]
