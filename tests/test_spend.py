"""Spend is recorded as each paid call returns, the judges' and the chunk contexts' as well
as the system's; a continued run's unchanged metrics are not logged a second time."""

from __future__ import annotations

import pytest

from arag.llm import ModelError, Prices, Usage
from arag.llm.cache import CachedModel, MeteredModel, SpendJournal
from arag.llm.scripted import ScriptedModel
from runners.job import make_scorers, prepare
from runners.settings import read
from tests.anthropic_fake import FakeAnthropic, error, text_reply
from tests.conftest import client_for, write_mini_dataset


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


def _grade(model, text: str):
    return model.complete("You grade summaries.", [{"role": "user", "content": text}])


def test_the_judges_journal_each_paid_call_as_it_returns_and_no_cached_or_failed_one(
        make_cfg, tmp_path, monkeypatch):
    """The judge and its panel write to the run's journal: one line per reply the API
    answered, priced at each judge's own rates; a reply from the response cache or a call
    that failed writes none."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    journal = SpendJournal(tmp_path / "judge_spend.run.jsonl")
    with FakeAnthropic(lambda request, n: text_reply("Final score: 4", request)) as fake:
        settings = read(make_cfg("judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
                                 "judge.max_retries=0", "judge.panel=[claude-sonnet-4-6]",
                                 fresh_cache=True))
        _, judges = make_scorers(settings, journal)
        judge, panel = judges["claude-haiku-4-5"], judges["claude-sonnet-4-6"]
        _grade(judge, "first summary")
        assert len(journal.path.read_text().splitlines()) == 1  # before the caller has it
        _grade(judge, "first summary")  # from the response cache: not paid
        fake.queue.append(error(500, "api_error", "boom"))
        with pytest.raises(ModelError):
            _grade(judge, "second summary")
        _grade(panel, "first summary")
    assert len(fake.usages) == 2 and judge.cached_calls == 1
    assert sum(judge.errors.values()) == 1
    assert len(journal.path.read_text().splitlines()) == 2
    haiku = Prices.from_config(settings.config.judge)
    sonnet = Prices.from_config(settings.panel["claude-sonnet-4-6"])
    first, second = (Usage(**u) for u in fake.usages)
    assert journal.spend_total() == pytest.approx(haiku.cost_usd(first) + sonnet.cost_usd(second))
    assert journal.spend_total() == pytest.approx(judge.cost_usd + panel.cost_usd)


def test_chunk_contexts_are_journaled_with_the_system_spend(make_cfg, tmp_path, monkeypatch):
    """The contexts the run's model writes for the index are paid calls of these
    predictions: each is in the spend journal as it returns, and a second pass (all from
    the response cache) adds nothing."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    root = write_mini_dataset(tmp_path / "d", n_docs=1, filler=20)
    with FakeAnthropic(lambda request, n: text_reply("From T0X's Q3 2024 call.", request)
                       ) as fake:
        job = prepare(read(make_cfg(f"dataset.root={root}", "model=claude-haiku-4-5",
                                    f"model.base_url={fake.url}", "retrieval.llm_context=true",
                                    fresh_cache=True)))
        contexts = job.chunk_contexts()
        assert contexts and len(fake.usages) == len(contexts)
        job.chunk_contexts()
    assert len(fake.usages) == len(contexts)
    prices = Prices.from_config(job.cfg.model)
    journal = SpendJournal(job.spend_path)
    assert len(job.spend_path.read_text().splitlines()) == len(contexts)
    assert journal.spend_total() == pytest.approx(
        sum(prices.cost_usd(Usage(**u)) for u in fake.usages))
