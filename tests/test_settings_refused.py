"""Every numeric setting is range-checked and every name list resolved before any run
opens: the command names the key and the fix, exits non-zero and leaves no run."""

from __future__ import annotations

import pytest

from runners.validation import ConfigError, validate_config
from tests.conftest import all_runs, compose_cfg, run_cli

# setting -> what the refusal says (the key with its value, and the fix)
REFUSED = {
    "system.top_k=-1": "Fix: system.top_k=null",
    "model.offline.chunks_per_read=0": "Fix: model.offline.chunks_per_read=2",
    "model.context_limit=0": "Fix: model.context_limit=200000",
    "model.requests_per_minute=0": "Fix: model.requests_per_minute=null",
    "model.tokens_per_minute=0": "Fix: model.tokens_per_minute=null",
    "retrieval.embedder.batch_size=0": "Fix: retrieval.embedder.batch_size=null",
    "model.max_retries=-1": "Fix: model.max_retries=6",
    "model.timeout_s=0": "Fix: model.timeout_s=120.0",
    "system.max_tokens=-1": "Fix: system.max_tokens=1024",
    "model.max_output_tokens=0": "Fix: model.max_output_tokens=1024",
    "model.price_output=-3": "Fix: model.price_output=0.0",
    "judge.price_input=-1": "Fix: judge.price_input=0.0",
    "retrieval.snippet_words=0": "Fix: retrieval.snippet_words=40",
    "retrieval.top_k=1000": "Fix: retrieval.top_k=20",
    "system.tools=[x]": "Fix: system.tools=[keyword_search,semantic_search,chunk_read]",
    "system.tools=[]": "for a closed-book baseline use system=closed_book",
    "model.retry_after_max_s=0": "Fix: model.retry_after_max_s=60.0",
    "metrics.scorers=[x]": "metrics.scorers=['x'] is invalid",
    "metrics.ranking.ks=[0]": "Fix: metrics.ranking.ks=[1,3,5,10]",
    "metrics.bertscore.batch_size=0": "Fix: metrics.bertscore.batch_size=32",
    "retrieval.embedder.device=cuda:7": "Fix: retrieval.embedder.device=cpu",
    "retrieval.embedder.device=tpu": "Fix: retrieval.embedder.device=cpu",
    "retrieval.embedder.path=/no/such/model": "retrieval.embedder.path=null",
    "+foo=bar": "foo is not a setting: nothing reads it",
    "+model.temprature=0.5": "model.temprature is not a setting",
    "runner.max_cost_usd=0": "Fix: runner.max_cost_usd=null",
    "dataset.limit=0": "Fix: dataset.limit=null",
    "runner.repeats=1000000000": "from 1 to 100 (answers per task and system). Fix: runner.repeats=1",
}


@pytest.mark.parametrize("setting", list(REFUSED))
def test_a_setting_out_of_range_is_refused_naming_the_key_and_the_fix(setting):
    cfg = compose_cfg(["system=arag", setting])
    with pytest.raises(ConfigError) as refused:
        validate_config(cfg)
    key = setting.lstrip("+").split("=")[0]
    assert key in str(refused.value) and REFUSED[setting] in str(refused.value)


@pytest.mark.parametrize("setting", ["system=naive retrieval.top_k=1000", "model.timeout_s=0.5",
                                     "retrieval.embedder.device=cpu", "system.top_k=null",
                                     "model.requests_per_minute=30", "model.max_retries=0"])
def test_a_setting_in_range_passes(setting):
    validate_config(compose_cfg(setting.split()))


@pytest.mark.parametrize("setting", ["model.requests_per_minute=0", "system.top_k=-1",
                                     "retrieval.embedder.batch_size=0", "system.tools=[x]"])
def test_the_sweep_stops_before_any_run_opens(setting, tmp_path):
    result = run_cli(tmp_path, "system=arag,naive", "dataset.limit=1", setting)
    assert result.returncode != 0
    assert REFUSED[setting] in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    runs = all_runs(tmp_path) if (tmp_path / "mlflow.db").exists() else []
    assert runs == []


def test_a_run_whose_every_task_was_skipped_is_not_finished(tmp_path, shared_cache):
    result = run_cli(tmp_path, "system=stuffing", "dataset.limit=2", "model.context_limit=1100",
                     cache=shared_cache, sweep=False)
    assert result.returncode != 0
    assert "every one of the 2 tasks was skipped" in result.stderr, result.stderr[-2000:]
    assert "exceeds the model's context" in result.stderr and "Fix:" in result.stderr
    (run,) = all_runs(tmp_path)
    assert run.info.status == "FAILED" and "all_skipped" in run.data.tags
