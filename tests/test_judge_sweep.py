"""A judged sweep end to end: offline systems, a Claude-compatible judge over HTTP.

The judge writes its score in varying formats and is sometimes unparseable; every eval
record must hold exactly the score the judge wrote, or null and counted. Re-scoring a run
logs a new linked run, and the second re-score makes no judge call; a re-score with
``metrics.geval.regenerate_criteria=true`` asks the judge for the criteria again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from arag.citations import strip_citations
from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides

pytestmark = pytest.mark.slow
FORMATS = ["Reasoning.\nFinal score: {s}", "Final Score: {s}/5", "**Final score:** {s}",
           "Final score: {s}\n\nNote: more text follows.", "I would rate this highly."]


def written(predicted: str, dim: str) -> tuple[int, str]:
    """The score (and reply) the fake judge writes for a summary on a dimension."""
    h = int(hashlib.sha256(f"{dim}:{predicted}".encode()).hexdigest(), 16)
    score = 1 + h % 5
    return score, FORMATS[h // 5 % len(FORMATS)].format(s=score)


def judge(request: dict, n: int) -> dict:
    prompt = request["messages"][-1]["content"]
    if "Write the evaluation steps" in prompt:
        return text_reply("1. Check each figure.\n2. Score.", request)
    if "Assign the error codes" in prompt:
        return text_reply("Codes: H, O, X", request)
    if "numerical claim" in prompt:
        return text_reply("Claims: none", request)
    if "'Supported: yes'" in prompt:  # a cited claim without figures (metrics.citations)
        return text_reply("Supported: yes", request)
    predicted = prompt.split("Predicted summary:\n", 1)[1].split("\n\nFollow", 1)[0]
    dim = "faithfulness" if "Faithfulness (1-5)" in prompt else "coverage"
    return text_reply(written(predicted, dim)[1], request)


def cli(tmp: Path, url: str, *args: str):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", *args, "judge=claude-haiku-4-5", f"judge.base_url={url}",
           "judge.retry_base_delay_s=0.01", *store_overrides(tmp),
           f"hydra.sweep.dir={tmp}/multirun", f"hydra.run.dir={tmp}/out"]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


def check_judged_report(tmp: Path, client) -> None:
    """The parent's report with a judge: G-Eval columns, the taxonomy table and chart, the
    worst failure with the judge's reasoning; and it can be rebuilt from the command line."""
    parent = next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")
    text = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                          str(tmp / "report"))).read_text()
    assert "Comparison metric: `geval_coverage`" in text
    assert "No judge" not in text and "no judge" not in text
    taxonomy = text.split("## Error taxonomy", 1)[1].split("##", 1)[0]
    assert "| arag |" in taxonomy and "error_taxonomy_by_system.png" in taxonomy
    assert "### A failure" in text and "Judge's reasoning:" in text
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/error_taxonomy_by_system.png" in plots
    rebuilt = forked.run([sys.executable, "-m", "report", parent.info.run_id,
                         "--tracking-uri", f"sqlite:///{tmp}/mlflow.db"], cwd=ROOT, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert f"report logged to run {parent.info.run_id}" in rebuilt.stdout
    # the rebuilt side-by-side page still links every task to its trace in the same store
    assert "compare.html has no links" not in rebuilt.stderr, rebuilt.stderr[-2000:]
    assert not (ROOT / "mlflow.db").exists()  # nothing written to a default store


def test_judged_sweep_then_rescoring(tmp_path):
    with FakeAnthropic(judge) as fake:
        sweep = cli(tmp_path, fake.url, "-m", "system=arag,naive,stuffing", "dataset=sample")
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        client = client_for(tmp_path)
        runs = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
        assert len(runs) == 3
        check_judged_report(tmp_path, client)
        for run in runs:
            path = client.download_artifacts(run.info.run_id, "predictions.eval.jsonl",
                                             str(tmp_path / run.info.run_id))
            preds = client.download_artifacts(run.info.run_id, "predictions.jsonl",
                                              str(tmp_path / run.info.run_id))
            # the judge reads each answer without its citation markers
            predicted = {json.loads(x)["id"]: strip_citations(json.loads(x)["predicted"])
                         for x in Path(preds).read_text().splitlines()}
            failures = 0
            for rec in map(json.loads, Path(path).read_text().splitlines()):
                for dim in ("faithfulness", "coverage"):
                    score, reply = written(predicted[rec["id"]], dim)
                    assert rec[f"geval_{dim}_reasoning"] == reply
                    if "Final" in reply:
                        assert rec[f"geval_{dim}"] == score
                    else:
                        assert rec[f"geval_{dim}"] is None and rec[f"geval_{dim}_parse_failed"]
                        failures += dim == "faithfulness"
                scores = [rec["geval_faithfulness"], rec["geval_coverage"]]
                if any(s is not None and s < 3 for s in scores):
                    assert rec["error_codes"] == ["H", "O"]  # "X" is outside the set: dropped
            assert run.data.metrics.get("geval_faithfulness_parse_failures", 0) == failures
            assert run.data.metrics["judge_cost_usd_total"] > 0
            assert {"geval_criteria.json"} <= {a.path for a in client.list_artifacts(
                run.info.run_id)}
        source = runs[0].info.run_id
        # replies without a readable score are recorded, counted and never cached
        unreadable = int(runs[0].data.metrics["judge_errors_unparseable"])
        assert unreadable == runs[0].data.metrics["geval_faithfulness_parse_failures"] + \
            runs[0].data.metrics.get("geval_coverage_parse_failures", 0) > 0
        before = len(fake.requests)
        first = cli(tmp_path, fake.url, "mode=evaluate", f"source_run_id={source}")
        assert first.returncode == 0, first.stderr[-3000:]
        after_first = len(fake.requests)
        second = cli(tmp_path, fake.url, "mode=evaluate", f"source_run_id={source}")
        assert second.returncode == 0, second.stderr[-3000:]
        # the sweep's judge calls were cached, except the unreadable replies: asked again
        # (judge.reask_unreadable=2: by each re-score, the second one's ask being the last)
        assert after_first - before == unreadable
        assert len(fake.requests) - after_first == unreadable
        after_second = len(fake.requests)
        regenerated = cli(tmp_path, fake.url, "mode=evaluate", f"source_run_id={source}",
                          "metrics.geval.regenerate_criteria=true")
        assert regenerated.returncode == 0, regenerated.stderr[-3000:]
        # the criteria requests went to the judge past the response cache; the steps came
        # back the same, so every scoring call was still a cache hit, and the unreadable
        # replies, asked three times, are kept: not asked a fourth time
        asked = [r["json"]["messages"][-1]["content"] for r in fake.requests[after_second:]]
        criteria = [a for a in asked if "Write the evaluation steps" in a]
        assert len(criteria) == 2 and len(asked) == 2
    rescored = [r for r in all_runs(tmp_path) if r.data.tags.get("source_run_id") == source]
    assert len(rescored) == 3 and all(r.info.status == "FINISHED" for r in rescored)
    assert all(r.data.tags["mode"] == "evaluate" for r in rescored)
    rescored.sort(key=lambda r: r.info.start_time)
    # all else from the response cache
    for r, fresh in zip(rescored, (unreadable, unreadable, 2), strict=True):
        calls, cached = r.data.metrics["judge_calls"], r.data.metrics["judge_cached_calls"]
        assert calls > 0 and cached == calls - fresh
        assert (r.data.metrics["judge_cost_usd_total"] > 0) == bool(fresh)
