"""The cost cap holds call by call: every call reserves its estimated cost before it is
sent, so at any concurrency spend passes ``runner.max_cost_usd`` by at most the calls in
flight when it was reached; the tag, the console and the report state the spend journal's
figure and count every task, the ones the cap left unrun included."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from arag.llm.base import ChatModel, Completion, ModelError, Usage
from arag.llm.budget import COST_CAP, CappedModel, SpendCap
from arag.llm.pricing import Prices
from arag.records import Prediction, Task
from runners.predict import predict
from tests import forked
from tests.anthropic_fake import FakeAnthropic, agent_policy
from tests.conftest import ROOT, all_runs, client_for, store_overrides

PRICES = Prices(input=1.0, output=5.0)  # USD per million tokens
PROMPT = "Summarise the quarter. " * 200  # about 1,150 tokens


class SlowPaidModel(ChatModel):
    """Answers after a pause, reporting 1,200 input and 300 output tokens a call."""

    provider, name = "fake", "fake"

    def __init__(self) -> None:
        self.sent = 0
        self._lock = threading.Lock()

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto") -> Completion:
        with self._lock:
            self.sent += 1
        time.sleep(0.05)
        return Completion([{"type": "text", "text": "ok"}], "end_turn", Usage(1200, 300), "fake")


def _call(model: ChatModel) -> float:
    try:
        completion = model.complete("s", [{"role": "user", "content": PROMPT}], max_tokens=512)
    except ModelError as exc:
        assert exc.kind == COST_CAP and "runner.max_cost_usd" in str(exc)
        return 0.0
    return PRICES.cost_usd(completion.usage)


def test_eight_threads_spend_at_most_the_cap_plus_the_call_in_flight_at_its_reach():
    inner = SlowPaidModel()
    cap = SpendCap(0.01, lambda: 0.002)  # $0.002 already journaled for these predictions
    model = CappedModel(inner, PRICES, cap)
    held = model.estimate("s", [{"role": "user", "content": PROMPT}], None, 512)
    with ThreadPoolExecutor(max_workers=8) as pool:
        paid = sum(pool.map(lambda _: _call(model), range(64)))
    per_call = PRICES.cost_usd(Usage(1200, 300))
    assert held >= per_call  # the reservation is an upper estimate of a call
    assert inner.sent == round(paid / per_call) < 64  # refused calls never reached the model
    assert 0.002 + paid == pytest.approx(cap.spent)
    assert cap.limit <= cap.spent < cap.limit + held  # the last call that fitted, no more
    assert cap.reached


def test_a_call_that_fails_releases_its_reservation():
    class Failing(SlowPaidModel):
        def complete(self, *args, **kwargs):
            raise ModelError("overloaded", kind="overloaded")

    cap = SpendCap(0.001)
    model = CappedModel(Failing(), PRICES, cap)
    for _ in range(3):  # each would be refused were the first reservation still held
        with pytest.raises(ModelError, match="overloaded"):
            model.complete("s", [{"role": "user", "content": PROMPT}], max_tokens=512)
    assert cap.spent == 0.0 and not cap.reached


def test_a_task_the_cap_refused_is_not_run_not_recorded_as_an_error(tmp_path):
    cap = SpendCap(1.0)

    class System:
        name = "capped"

        def predict(self, task: Task, source: str) -> Prediction:
            refused = task.id != "t0"
            if not refused:
                cap.charge(1.5)  # the first task's calls take the whole cap
            return Prediction(id=task.id, source=source, system=self.name, model="m",
                              task_type="summarization", question=task.question,
                              doc_ids=list(task.doc_ids), ground_truth="",
                              predicted=None if refused else "answer", cost_usd=1.5,
                              error="ModelError: not sent" if refused else None,
                              error_kind=COST_CAP if refused else None)

    tasks = [Task(f"t{i}", "summarization", ("D",), f"q{i}", "ref") for i in range(4)]
    log = tmp_path / "predictions.jsonl"
    out = predict(System(), tasks[:2], log, source="s", concurrency=2, progress=False, cap=cap)
    assert [p.id for p in out.predictions] == ["t0"] and out.not_run == ["t1"]
    assert [json.loads(x)["id"] for x in log.read_text().splitlines()] == ["t0"]
    assert out.stop_reason == ("cost cap runner.max_cost_usd=1 reached (spent $1.5000); "
                               "1 tasks not run")


@pytest.mark.slow
def test_a_capped_agent_run_at_concurrency_8_and_every_figure_of_its_spend(tmp_path):
    """A-RAG makes several calls a task; with all six sample tasks in flight at once, the
    cap stops the calls, not only the tasks not yet started."""
    cap = 0.02
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "system=arag", "dataset=sample", "model=claude-haiku-4-5",
           "runner.concurrency=8", f"runner.max_cost_usd={cap}", "judge=none",
           f"hydra.run.dir={tmp_path}/out", *store_overrides(tmp_path)]
    with FakeAnthropic(agent_policy(rounds=3), delay=0.2) as fake:
        done = forked.run([*cmd, f"model.base_url={fake.url}"], cwd=ROOT, env=env, timeout=600)
        usages = list(fake.usages)
    assert done.returncode != 0 and "stopped by the cost cap" in done.stderr, done.stderr[-3000:]
    prices = Prices(1.0, 5.0, 0.10, 1.25)  # conf/model/claude-haiku-4-5.yaml
    costs = [prices.cost_usd(Usage(**u)) for u in usages]
    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    folder = next(Path(tmp_path).rglob("spend.jsonl"))
    journal = sum(json.loads(x)["cost_usd"] for x in folder.read_text().splitlines())
    assert journal == pytest.approx(sum(costs))  # every paid call, as the server billed it
    # at most the cap plus the calls in flight when it was reached (8 at concurrency 8);
    # without the per-call hold all 6 tasks' 4 calls each would have been paid
    assert 0 < journal <= cap + 8 * max(costs) and len(usages) < 6 * 4
    said = f"spent ${journal:.4f}"
    assert said in run.data.tags["stopped"]
    assert said in done.stderr
    not_run = int(run.data.tags["n_not_run"])
    ran = int(run.data.metrics["n_tasks"])
    assert ran + not_run == 6 and not_run > 0
    assert f"{ran} of 6 tasks answered, {not_run} not run" in done.stderr
    client = client_for(tmp_path)
    report = Path(client.download_artifacts(run.info.run_id, "report.md",
                                            str(tmp_path / "r"))).read_text()
    assert f"{ran} of 6 tasks run, {not_run} not run, {said}" in report
    terminal = " ".join(x.strip() for x in done.stdout.splitlines())  # lines wrapped to fit
    assert f"{ran} of 6 tasks run, {not_run} not run, {said}" in terminal
    assert run.data.metrics["cost_usd_spent_total"] == pytest.approx(journal, abs=1e-6)
