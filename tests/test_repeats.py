"""runner.repeats: every answer to a task is a request of its own, paid once.

The real anthropic SDK against the local fake Messages API, through the real response cache:
K repeats send K times the requests of one, the same command again sends none, and raising
K asks only the new repeats. Repeat 0 keeps the cache key a request always had.
"""

from __future__ import annotations

import html
import json
import re
from types import SimpleNamespace

import pytest

from arag.llm.cache import CachedModel, response_key
from arag.records import Prediction, Task
from runners.predict import predict, read_log
from tests.anthropic_fake import FakeAnthropic
from tests.test_claude import claude


class OneCallSystem:
    """Asks its model once per task and answers with the reply."""

    name = "one-call"

    def __init__(self, model):
        self.ctx = SimpleNamespace(model=model)

    def predict(self, task: Task, source: str) -> Prediction:
        reply = self.ctx.model.complete("You summarize.", [{"role": "user",
                                                            "content": task.question}])
        return Prediction(id=task.id, source=source, system=self.name, model="m",
                          task_type="summarization", question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth="", predicted=reply.text)


class PaidADollar(OneCallSystem):
    """Answers without a model call, each answer costing $1."""

    def predict(self, task: Task, source: str) -> Prediction:
        return Prediction(id=task.id, source=source, system=self.name, model="m",
                          task_type="summarization", question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth="", predicted="a",
                          cost_usd=1.0)


def _tasks(n: int) -> list[Task]:
    return [Task(f"t{i}", "summarization", ("D",), f"question {i}", "ref") for i in range(n)]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def _run(make_cfg, fake, tmp_path, repeats: int, folder: str) -> tuple[int, list[Prediction]]:
    """Requests the fake received for one prediction run, and its predictions."""
    before = len(fake.requests)
    model = CachedModel(claude(make_cfg, fake.url), tmp_path / folder / "cache")
    out = predict(OneCallSystem(model), _tasks(3), tmp_path / folder / "predictions.jsonl",
                  source="s", progress=False, repeats=repeats)
    return len(fake.requests) - before, out.predictions


def test_repeats_are_asked_once_each_and_raising_k_asks_only_the_new_ones(make_cfg, fake,
                                                                         tmp_path):
    one, _ = _run(make_cfg, fake, tmp_path, 1, "k1")
    three, preds = _run(make_cfg, fake, tmp_path, 3, "k3")
    assert one == 3 and three == 3 * one
    assert [(p.id, p.repeat) for p in preds] == [(f"t{i}", r) for i in range(3) for r in range(3)]
    again, _ = _run(make_cfg, fake, tmp_path, 3, "k3")
    assert again == 0
    four, preds = _run(make_cfg, fake, tmp_path, 4, "k3")
    assert four == one and sorted({p.repeat for p in preds}) == [0, 1, 2, 3]
    assert sorted(read_log(tmp_path / "k3" / "predictions.jsonl")) == sorted(
        [f"t{i}" for i in range(3)] + [f"t{i}#{r}" for i in range(3) for r in (1, 2, 3)])


def test_a_lost_response_cache_still_resumes_from_the_records(make_cfg, fake, tmp_path):
    _run(make_cfg, fake, tmp_path, 2, "k2")
    (tmp_path / "k2" / "cache").rename(tmp_path / "gone")
    again, _ = _run(make_cfg, fake, tmp_path, 2, "k2")
    assert again == 0  # resume counts repeats: nothing on disk is asked again


def test_repeat_zero_keeps_the_key_requests_always_had(tmp_path):
    request = {"system": "s", "messages": [{"role": "user", "content": "q"}]}
    plain = response_key("anthropic", "m", **request)
    assert response_key("anthropic", "m", **request, repeat=0) == plain
    assert response_key("anthropic", "m", **request, repeat=1) != plain
    assert response_key("anthropic", "m", **request, repeat=1) != response_key(
        "anthropic", "m", **request, sample=1)  # a judge sample is not a repeat


def test_the_cost_cap_counts_every_repeat(tmp_path):
    out = predict(PaidADollar(None), _tasks(2), tmp_path / "p.jsonl", source="s", progress=False,
                  concurrency=1, repeats=3, max_cost_usd=2.5)
    assert len(out.predictions) == 3 and len(out.not_run) == 3
    assert out.not_run == ["t1", "t1#1", "t1#2"] and "3 answers not run" in out.stop_reason
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert [json.loads(line)["repeat"] for line in lines] == [0, 1, 2]


def test_the_cost_cap_stops_the_largest_repeat_count_allowed(tmp_path):
    from runners.config import MAX_REPEATS

    out = predict(PaidADollar(None), _tasks(3), tmp_path / "p.jsonl", source="s", progress=False,
                  concurrency=4, repeats=MAX_REPEATS, max_cost_usd=2.5)
    assert len(out.predictions) <= 3 + 4  # the cap, plus at most the calls in flight
    assert len(out.not_run) == 3 * MAX_REPEATS - len(out.predictions)


# --- what repeats show: aggregates over tasks, the variance split, stability ---------------

def _answers(scores: dict[str, list[float]], key: str = "geval_coverage", **extra) -> list[dict]:
    """Eval records: task id -> its score per repeat."""
    return [{"id": t, "repeat": r, key: v, "error": None, "skipped": False, "null_reasons": {},
             "predicted": f"{t} answer {r}", "reference": "ref", "question": "q",
             "document_tokens": 1000, **extra}
            for t, values in scores.items() for r, v in enumerate(values)]


SCORES = {f"t{i}": s for i, s in enumerate([1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 1, 4])}


def test_the_ci_does_not_shrink_when_repeats_are_identical():
    from metrics import aggregate
    from metrics.base import Metric
    from report.verdict import task_sets

    class Coverage:
        metrics = [Metric("geval_coverage")]

        def aggregate(self, answered, records):
            return {}

    once = aggregate(_answers({t: [s] for t, s in SCORES.items()}), [Coverage()])
    five = aggregate(_answers({t: [s] * 5 for t, s in SCORES.items()}), [Coverage()])
    for name in ("geval_coverage_mean", "geval_coverage_ci_low", "geval_coverage_ci_high"):
        assert five[name] == pytest.approx(once[name])
    assert five["n_repeats"] == 5 and five["n_task_ids"] == once["n_task_ids"] == 12
    assert five["geval_coverage_var_within_task"] == 0.0  # measured, and 0: not unknown
    assert "geval_coverage_var_within_task" not in once  # one repeat: unknown, not 0
    # the paired comparison too: same pairs, same CI, however many repeats
    other = {t: s - 0.5 * (i % 3) for i, (t, s) in enumerate(SCORES.items())}
    rows = [{"run": "a", "run_id": "a"}, {"run": "b", "run_id": "b"}]
    pairs = []
    for k in (1, 5):
        sets = task_sets(rows, {"a": _answers({t: [s] * k for t, s in SCORES.items()}),
                                "b": _answers({t: [s] * k for t, s in other.items()})})
        pairs.append(sets.pair(rows[0], rows[1], "geval_coverage"))
    assert pairs[0] == pairs[1] and pairs[0].n == 12


def test_the_variance_split_recovers_tasks_generation_and_judge():
    from metrics.repeats import projected_narrowing, variance_components

    # task means 1..4 (sample variance 5/3); every task's repeats mean +-1 (variance 2)
    records = _answers({f"t{m}": [m - 1, m + 1, m - 1, m + 1] for m in range(1, 5)})
    for r in records:
        r["geval_coverage_samples"] = [r["geval_coverage"] - 1, r["geval_coverage"] + 1]
    parts = variance_components(records, "geval_coverage")
    within = 4 / 3  # ddof=1 over four repeats of -1, +1, -1, +1
    assert parts.within_task == pytest.approx(within)
    assert parts.between_tasks == pytest.approx(5 / 3 - within / 4)
    assert parts.judge == pytest.approx(2 / 2)  # samples' variance 2 over 2 samples
    more = projected_narrowing(parts)
    z = 1.959964
    assert more.now == pytest.approx(z * (5 / 3 / 4) ** 0.5, rel=1e-5)
    assert more.more_repeats == pytest.approx(z * ((5 / 3 - within / 4 + within / 9) / 4) ** 0.5,
                                              rel=1e-5)
    assert more.more_tasks == pytest.approx(z * (5 / 3 / 104) ** 0.5, rel=1e-5)
    assert "5 more repeats would narrow it to" in more.sentence("x")


# The issue's case: 6 tasks answered 3 times (18 answers), judge scores 1-5; three pairs
# whose task means differ less than their repeats do, so the between-task part is estimated
# as 0. Hand computation: 1.96 * sqrt((0 + within / 8) / 6) with within 19/6, 89/18, 67/9.
ISSUE_PAIRS = [(19 / 6, 0.503), (89 / 18, 0.629), (67 / 9, 0.772)]


@pytest.mark.parametrize("within, by_hand", ISSUE_PAIRS)
def test_more_repeats_shrink_only_the_within_task_part_as_computed_by_hand(within, by_hand):
    from metrics.repeats import Components, projected_narrowing

    observed = 0.0742  # variance of the 6 task means: a half-width of 0.218, below within / 3
    parts = Components(0.0, within, None, 6, 3, observed)
    more = projected_narrowing(parts)
    assert round(more.more_repeats, 3) == by_hand
    assert more.more_repeats < more.now  # repeats narrow, never widen
    assert more.more_repeats > 1.959964 * (0.0 / 6) ** 0.5  # the between part would stay
    assert "0.000" not in more.sentence("a-b")


def test_a_pair_whose_task_means_agree_gets_widths_from_its_split_never_zero():
    from metrics.repeats import difference_components, projected_narrowing

    # every task's difference has mean 1 over its 3 repeats: the task means do not vary,
    # the repeats do (within-task variance 19/6)
    diffs = [[3, 0, 0], [0, 3, 0], [-1, 2, 2], [2, 2, -1], [4, -1, 0], [1, 1, 1]]
    first = _answers({f"t{i}": [2 + d for d in ds] for i, ds in enumerate(diffs)})
    second = _answers({f"t{i}": [2, 2, 2] for i in range(6)})
    parts = difference_components(first, second, "geval_coverage")
    assert (parts.between_tasks, parts.n_tasks, parts.repeats) == (0.0, 6, 3)
    assert parts.within_task == pytest.approx(19 / 6)
    more = projected_narrowing(parts)
    assert round(more.now, 3) == 0.822 and round(more.more_repeats, 3) == 0.503
    assert round(more.more_tasks, 3) == round(1.959964 * (19 / 18 / 106) ** 0.5, 3)
    text = more.sentence("arag-naive")
    assert "normal-approximation 95% CI" in text and "not the key finding's bootstrap CI" in text
    assert "0.000" not in text


def test_stability_share_and_pass_all():
    from metrics.repeats import pass_all, repeat_differences, stability_share

    a = _answers({"t0": [3, 3, 3, 3, 3], "t1": [3, 1, 3, 1, 3]})
    b = _answers({"t0": [1, 1, 1, 1, 1], "t1": [2, 2, 2, 2, 2]})
    assert stability_share(a, b, "geval_coverage") == (0.5, 2)  # t1 wins 3 of 5: unstable
    assert repeat_differences(a, b, "geval_coverage") == [1.5, 0.5, 1.5, 0.5, 1.5]
    qa = _answers({"t0": [1, 1, 1], "t1": [1, 0, 1], "t2": [0, 0, 0]}, key="qa_contain_match")
    assert pass_all(qa, "qa_contain_match") == pytest.approx(1 / 3)
    assert pass_all(_answers({"t0": [1]}, key="qa_contain_match"), "qa_contain_match") is None


def _row(name: str, **extra) -> dict:
    return {"run": name, "run_id": name, "status": "FINISHED", "system": name,
            "agentic": name == "arag", "retrieves": True, "model_provider": "anthropic",
            "judge_provider": "anthropic", "judge": "haiku", "synthetic": False,
            "target_length": "50", "judge_panel": [], "judge_samples": "1", "judge_calls": 10.0,
            "repeats": 3, "temperature_sent": "1", **extra}


def test_the_report_states_k_the_projection_and_an_unstable_winner():
    from report.report import build_report

    # arag wins overall, but loses in repeat 1 taken alone
    arag = _answers({f"t{i}": [4, 1, 4] for i in range(8)})
    naive = _answers({f"t{i}": [2, 2, 2] for i in range(8)})
    text, _ = build_report([_row("arag"), _row("naive")], {"arag": arag, "naive": naive}, "t")
    finding = text.split("## Key finding\n", 1)[1].split("\n## ", 1)[0]
    assert "**arag** vs **naive** (n=8): 3.000 vs 2.000" in finding
    assert "**The winner is not stable across repeats**: arag leads in 2 of 3" in finding
    repeats = text.split("## Repeats\n", 1)[1]
    assert "**K=3 times**" in repeats
    assert re.search(r"normal-approximation 95% CI of the arag-naive difference .* half-width "
                     r"0\.693: 5 more repeats would narrow it to 0\.424, 100 more tasks to "
                     r"\d\.\d{3}", repeats)
    assert not re.search(r"(half-width|narrow it to|tasks to) 0\.000", repeats)
    assert "| arag − naive | 8 | 3 |" in repeats


def test_a_pair_too_few_to_test_whose_ci_excludes_0_still_warns_of_an_unstable_winner():
    from report.report import build_report

    arag = _answers({f"t{i}": [4, 1, 4] for i in range(4)})  # 4 tasks: too few to test
    naive = _answers({f"t{i}": [2, 2, 2] for i in range(4)})
    text, _ = build_report([_row("arag"), _row("naive")], {"arag": arag, "naive": naive}, "t")
    finding = text.split("## Key finding\n", 1)[1].split("\n## ", 1)[0]
    assert "95% CI [1.000, 1.000]" in finding and "**too few to test**" in finding
    assert "**The winner is not stable across repeats**: arag leads in 2 of 3" in finding


def test_repeats_that_cannot_vary_are_named_in_a_caveat():
    from report.report import build_report

    same = _answers({f"t{i}": [3, 3] for i in range(6)})
    rows = [_row("arag", temperature_sent="0"), _row("naive", model_provider="offline")]
    text, _ = build_report(rows, {"arag": same, "naive": same}, "t")
    banner = text.split("Runs:", 1)[0]
    assert "Repeats of arag, naive cannot vary" in banner
    assert "| arag | 6 | 2 | 0.000 | 0.000 |" in text  # measured: no spread at all


def test_compare_page_shows_a_tasks_repeats_side_by_side():
    from report import compare

    records = {"a": _answers({"t0": [1, 5]}), "b": _answers({"t0": [2]})}
    traces = {"a": {"t0": "tr-0", "t0#1": "tr-1"}}
    page = compare.page([_row("a"), _row("b")], records, "geval_coverage", traces, "7", "S")
    assert page.count("class='repeat'") == 2 and "repeat 1</div>" in page
    assert "t0 answer 0" in page and "t0 answer 1" in page
    assert "#/experiments/7/traces/tr-1'" in page
    scores = json.loads(html.unescape(re.search(r"data-scores='([^']*)'", page).group(1)))
    assert scores["0"]["geval_coverage"] == 3.0  # sorted by the task's mean over repeats


@pytest.mark.slow  # builds the sample's index and loads the tokenizer: slow on a busy machine
def test_the_dry_run_prices_every_repeat(make_cfg, capsys):
    from runners.experiment import run
    from runners.settings import read

    def estimate(repeats: int) -> tuple[float, str]:
        cfg = make_cfg("system=naive", "dataset=sample", "dataset.limit=2",
                       "model=claude-haiku-4-5", "runner.dry_run=true",
                       f"runner.repeats={repeats}")
        cost = run(read(cfg))["estimated_cost_usd"]
        return cost, capsys.readouterr().out

    once, _ = estimate(1)
    thrice, printed = estimate(3)
    assert once > 0 and thrice == pytest.approx(3 * once)
    assert "[dry run] naive (x3 repeats): 2 tasks, 6 model calls" in printed


def test_the_cost_cap_message_counts_answers_with_repeats():
    from runners.errors import cost_cap_message

    once = cost_cap_message("r", {"n_answered": 2, "n_tasks": 2, "n_not_run": 1}, 1.0)
    thrice = cost_cap_message("r", {"n_answered": 4, "n_tasks": 4, "n_not_run": 2,
                                    "n_repeats": 3}, 1.0)
    assert "2 of 3 tasks answered" in once and "answered tasks are resumed" in once
    assert "4 of 6 answers given" in thrice and "given answers are resumed" in thrice
