"""Every judge request fits the judge's window: one that does not is never sent, its score
is null saying so, the dry run counts it in advance, and a run is not failed or retried for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.llm.base import ModelError, estimate_tokens
from arag.llm.scripted import ScriptedModel
from arag.llm.window import CONTEXT_WINDOW, WindowedModel, judge_window, request_tokens
from metrics.judging import judge_calls, judge_request
from runners.dryrun import estimate_requests
from runners.errors import failed_judge_calls, has_errors
from tests.anthropic_fake import FakeAnthropic, prompt_blocks
from tests.conftest import all_runs, client_for
from tests.test_judge_sweep import cli, judge

SHORT = judge_request("Judge.", "Score this summary: revenue rose.", 100)
LONG = judge_request("Judge.", "Source document: " + "revenue rose 4 percent. " * 400, 100)


def test_a_request_over_the_window_is_not_sent_and_says_why():
    inner = ScriptedModel(["Final score: 4"])
    model = WindowedModel(inner, 1_000, judge_window())
    with pytest.raises(ModelError) as refused:
        model.complete(**LONG)
    assert refused.value.kind == CONTEXT_WINDOW
    assert "not sent" in str(refused.value) and "judge.context_limit=1,000" in str(refused.value)
    assert inner.requests == []  # nothing reached the model
    assert model.complete(**SHORT).text == "Final score: 4"


def test_judge_calls_give_the_unsent_item_its_reason_and_send_the_rest_batched_or_not():
    for batch in (False, True):
        inner = ScriptedModel(["Final score: 4"])
        model = WindowedModel(inner, 1_000, judge_window())
        replies = judge_calls(model, {"short": SHORT, "long": LONG}, batch=batch)
        assert replies["short"].text == "Final score: 4" and len(inner.requests) == 1
        assert isinstance(replies["long"], ModelError)
        assert replies["long"].kind == CONTEXT_WINDOW


def test_requests_left_unsent_neither_fail_the_run_nor_make_it_retry():
    metrics = {"judge_errors": 3.0, f"judge_errors_{CONTEXT_WINDOW}": 3.0, "judge_calls": 5.0}
    assert failed_judge_calls(metrics) == 0 and not has_errors(metrics)


def test_the_dry_run_counts_in_advance_what_the_run_will_not_send(tmp_path):
    from arag.config import JudgeConfig

    judge_cfg = JudgeConfig(name="claude-haiku-4-5", provider="anthropic",
                            model_id="claude-haiku-4-5", context_limit=1_000, price_input=1.0,
                            price_output=5.0)
    est = estimate_requests("naive judge", {"a": SHORT, "b": LONG}, judge_cfg, tmp_path,
                            window=judge_window())
    needed = request_tokens(estimate_tokens, **LONG)
    assert est.n_calls == 1 and est.unsent == [needed]
    assert (f"1 more would not fit judge.context_limit=1,000 (largest ~{needed:,} tokens): "
            "not sent") in est.line()


@pytest.mark.slow
def test_a_judged_sweep_sends_no_request_over_the_judges_window(tmp_path):
    """Stuffing's faithfulness is judged against whole documents (about 2,500 tokens each
    on the sample); with a 2,000-token judge window those requests are never sent, while
    naive's retrieved chunks and every coverage request fit and are judged."""
    limit = 2_000
    with FakeAnthropic(judge) as fake:
        sweep = cli(tmp_path, fake.url, "-m", "system=naive,stuffing", "dataset=sample",
                    "dataset.limit=2", f"judge.context_limit={limit}")
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        sent = [r["json"] for r in fake.requests if (r["json"] or {}).get("messages")]
    # the fake server's own count (~4 characters of JSON a token) of the largest request
    largest = max(prompt_blocks(r)[-1].tokens + r["max_tokens"] for r in sent)
    assert 0 < largest <= limit, largest
    client = client_for(tmp_path)
    runs = {r.data.tags["system"]: r for r in all_runs(tmp_path) if r.data.tags.get("system")}
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    for system, run in runs.items():
        records = [json.loads(x) for x in Path(client.download_artifacts(
            run.info.run_id, "predictions.eval.jsonl", str(tmp_path / system))).read_text()
            .splitlines()]
        assert all(r["geval_coverage_reasoning"] for r in records)  # coverage fits: judged
        faithfulness = [(r["geval_faithfulness"], r["null_reasons"].get("geval_faithfulness"))
                        for r in records]
        if system == "naive":
            assert all(reason is None or "not sent" not in reason for _, reason in faithfulness)
        else:
            assert all(score is None and reason.startswith("not sent: the judge request needs")
                       and f"judge.context_limit={limit:,}" in reason
                       for score, reason in faithfulness), faithfulness
            # counted by kind (the taxonomy call shows the document too), never a failure
            assert run.data.metrics[f"judge_errors_{CONTEXT_WINDOW}"] >= len(records)
