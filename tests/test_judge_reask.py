"""Judge replies that cannot be read are asked again by the next run of the same command.

A single run (offline system, a Claude judge over HTTP against the fake Messages API) gets
unreadable G-Eval replies: its scores are null with the reason and the run counts
``judge_replies_to_ask_again``. The same command continues the FINISHED run: only those
calls go to the judge again; the score now given joins the trace once; a reply unreadable
on every ask (``judge.reask_unreadable=1``: two asks) stays null, "unreadable after 2
asks". A third run has nothing to do and asks nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import mlflow
import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides

pytestmark = pytest.mark.slow

UNREADABLE = "I would rather not say."


def _dimension(prompt: str) -> str | None:
    if "Predicted summary:" not in prompt:
        return None
    return "faithfulness" if "Faithfulness (1-5)" in prompt else "coverage"


def reluctant_judge():
    """Faithfulness: never readable. Coverage: unreadable the first time it is asked."""
    asked: Counter = Counter()

    def handle(request: dict, n: int) -> dict:
        prompt = request["messages"][-1]["content"]
        if "Write the evaluation steps" in prompt:
            return text_reply("1. Check each figure.\n2. Score.", request)
        if "Assign the error codes" in prompt:
            return text_reply("Codes: none", request)
        dim = _dimension(prompt)
        asked[dim] += 1
        if dim == "coverage" and asked[dim] > 1:
            return text_reply("Reasoning.\nFinal score: 4", request)
        return text_reply(UNREADABLE, request)

    return handle


def _run(tmp: Path, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "system=naive", "dataset=sample", "dataset.limit=1",
           "metrics.scorers=[rouge,geval]", "judge=claude-haiku-4-5", f"judge.base_url={url}",
           "judge.retry_base_delay_s=0.01", "judge.reask_unreadable=1",
           "runner.max_parse_failure_rate=1", *store_overrides(tmp),
           f"hydra.run.dir={tmp}/out"]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


def _graded(requests: list[dict]) -> Counter:
    return Counter(_dimension(r["json"]["messages"][-1]["content"]) for r in requests
                   if _dimension(r["json"]["messages"][-1]["content"]))


def _record(tmp: Path, run_id: str) -> dict:
    path = client_for(tmp).download_artifacts(run_id, "predictions.eval.jsonl",
                                              str(tmp / f"dl{len(list(tmp.glob('dl*')))}"))
    (record,) = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return record


def _trace_scores(tmp: Path, run) -> Counter:
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    try:
        (trace,) = mlflow.search_traces(locations=[run.info.experiment_id],
                                        run_id=run.info.run_id, return_type="list",
                                        include_spans=False)
    finally:
        mlflow.set_tracking_uri(None)
    return Counter(a.name for a in trace.info.assessments)


def test_unreadable_judge_replies_are_asked_again_by_the_same_command(tmp_path):
    with FakeAnthropic(reluctant_judge()) as fake:
        first = _run(tmp_path, fake.url)
        assert first.returncode == 0, first.stderr[-3000:]
        assert _graded(fake.requests) == {"faithfulness": 1, "coverage": 1}
        (run,) = all_runs(tmp_path)
        assert run.info.status == "FINISHED"
        assert run.data.metrics["judge_replies_to_ask_again"] == 2
        record = _record(tmp_path, run.info.run_id)
        assert record["geval_coverage"] is None and record["geval_faithfulness"] is None
        assert "asked again by the next run" in record["null_reasons"]["geval_coverage"]
        assert "geval_coverage" not in _trace_scores(tmp_path, run)

        seen = len(fake.requests)
        second = _run(tmp_path, fake.url)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "Nothing new" not in second.stdout  # its report is written again
        # only the two unreadable calls went to the judge again, in the same run
        assert _graded(fake.requests[seen:]) == {"faithfulness": 1, "coverage": 1}
        assert len(fake.requests) - seen == 2
        (again,) = all_runs(tmp_path)
        assert again.info.run_id == run.info.run_id and again.info.status == "FINISHED"
        assert again.data.metrics["judge_replies_to_ask_again"] == 0
        assert again.data.metrics["geval_coverage_mean"] == 4
        record = _record(tmp_path, run.info.run_id)
        assert record["geval_coverage"] == 4 and record["geval_faithfulness"] is None
        assert record["null_reasons"]["geval_faithfulness"] == (
            "the judge's reply has no parseable 'Final score': unreadable after 2 asks")
        scores = _trace_scores(tmp_path, again)
        assert scores["geval_coverage"] == 1 and set(scores.values()) == {1}

        seen = len(fake.requests)
        third = _run(tmp_path, fake.url)
        assert third.returncode == 0, third.stderr[-3000:]
        assert len(fake.requests) == seen  # nothing to do: the null stays
        assert "nothing to do" in third.stderr + third.stdout
