"""The pairwise judge's plan, reply contract and figures, with a judge model whose
preference and first-position bias are planted (no network: the sweep test asks the
real SDK over HTTP)."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from arag.llm.base import ChatModel, Completion, Usage
from arag.records import Corpus, Document, Task
from metrics.pairwise import (
    DIMENSIONS,
    Pair,
    answers_of,
    metrics_of,
    outcomes,
    parse_winner,
    plan,
    summarize,
    verdict_rows,
)
from report.analyses.pairwise import claims, preference
from report.writers.markdown import section_of
from report.writers.words import say

QUALITY = {"arag": 3, "naive": 2, "stuffing": 1}  # the planted preference, by answer text
SUMMARY = re.compile(r"Summary A:\n(.*?)\n\nSummary B:\n(.*?)\n\nCompare", re.DOTALL)


def biased(prompt: str, share: float) -> bool:
    """Whether the judge names the first answer whatever it reads (a planted share of calls)."""
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 1000 < share * 1000


class PlantedJudge(ChatModel):
    """Prefers the summary of the better system (the system is the text's first word); on
    a planted share of calls names the first one shown; ``unreadable``: tasks whose
    replies end without a Winner line."""

    provider = "planted"
    name = "planted"

    def __init__(self, bias: float = 0.0, unreadable: frozenset[str] = frozenset()):
        self.bias = bias
        self.unreadable = unreadable
        self.calls = 0

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto") -> Completion:
        self.calls += 1
        prompt = messages[-1]["content"]
        first, second = SUMMARY.search(prompt).groups()
        if any(t in prompt for t in self.unreadable):
            text = "Both are fine.\nI cannot decide."
        elif biased(prompt, self.bias):
            text = "The first reads better.\nWinner: A"
        else:
            qa, qb = QUALITY[first.split()[0]], QUALITY[second.split()[0]]
            text = "Reasons.\n" + ("Winner: A" if qa > qb else "Winner: B" if qb > qa
                                   else "**Winner:** tie")
        return Completion([{"type": "text", "text": text}], "end_turn", Usage(10, 5), self.name)


def dataset(n: int = 40, reference: bool = True) -> tuple[dict[str, Task], Corpus]:
    docs = {f"d{i}": Document(f"d{i}", (f"Revenue rose {i} percent.", "Margins held."))
            for i in range(n)}
    tasks = {f"t{i}": Task(f"t{i}", "summary", (f"d{i}",), "Summarize the call.",
                           f"Revenue rose {i} percent." if reference else "")
             for i in range(n)}
    return tasks, Corpus(docs)


def records(system: str, n: int = 40, repeats: int = 1) -> list[dict]:
    return [{"id": f"t{i}", "repeat": r, "predicted": f"{system} summary {i} [c:x]"}
            for i in range(n) for r in range(repeats)]


def judged(systems: list[str], pairs: list[Pair], judge: ChatModel, n: int = 40,
           repeats: int = 1, limit: int = 200_000, reference: bool = True) -> list[dict]:
    tasks, corpus = dataset(n, reference)
    answers = {s: answers_of(records(s, n, repeats)) for s in systems}
    return verdict_rows(plan(pairs, answers, tasks, corpus, judge, limit), {"planted": judge})


@pytest.mark.parametrize(("reply", "verdict"), [
    ("Reasoning.\nWinner: A", "A"), ("x\nWinner: B\n\n", "B"), ("x\nwinner: Tie", "tie"),
    ("x\n**Winner:** B", "B"), ("Winner: A\nBut on reflection more text.", None),
    ("Summary A is better.", None), ("Winner: A or B", None), ("", None)])
def test_the_reply_contract_is_the_last_line(reply, verdict):
    assert parse_winner(reply) == verdict


def test_every_pair_is_asked_in_both_orders_and_the_planted_preference_and_bias_show():
    judge = PlantedJudge(bias=0.3)
    pair = Pair("arag", "naive")
    rows = judged(["arag", "naive"], [pair], judge)
    assert judge.calls == len(rows) == 40 * len(DIMENSIONS) * 2
    for found in outcomes(rows):  # each (task, dimension): one reply per order
        assert sorted(r["order"] for r in found.rows) == ["a_first", "b_first"]
        assert {r["first"] for r in found.rows} == {"arag", "naive"}
    # the summary shown is the one without its citation markers
    assert all("[c:" not in r["reply"] for r in rows)
    summary = summarize(rows)
    for f in summary.figures():
        # bias only ever turns a win into a (position-inconsistent) tie: never a loss
        assert f.losses == 0 and f.wins > f.ties and f.winner == "arag"
        assert f.position_inconsistency == pytest.approx(0.3, abs=0.15)
        assert f.first_position_preference > 0.5  # the planted preference for "A"
        assert f.sign_test_p < 0.05
        assert f.win_rate_ci[0] <= f.win_rate <= f.win_rate_ci[1]
        assert f.ties == f.inconsistent  # no true tie: every tie is the order's doing
    assert summary.of("planted")["position_inconsistency"] == pytest.approx(0.3, abs=0.1)
    metrics = metrics_of(summary)
    assert metrics["pairwise_overall_arag_vs_naive_win_rate"] == summary.figures()[-1].win_rate
    assert "pairwise_position_inconsistency" in metrics


def test_an_unbiased_judge_is_consistent_and_unreadable_replies_are_never_ties():
    judge = PlantedJudge(unreadable=frozenset({"Revenue rose 3 percent."}))
    rows = judged(["arag", "naive"], [Pair("arag", "naive")], judge, n=10)
    for f in summarize(rows).figures():
        assert f.position_inconsistency == 0.0
        assert f.unreadable == 1 and f.n_tasks == 9 and f.wins == 9 and f.ties == 0
    assert {o.status for o in outcomes(rows) if o.task_id == "t3"} == {"unreadable"}


def test_a_request_over_the_judges_context_window_is_not_sent():
    judge = PlantedJudge()
    rows = judged(["arag", "naive"], [Pair("arag", "naive")], judge, n=3, limit=450)
    assert judge.calls == 0 and rows
    assert all("judge.context_limit=450" in r["skip_reason"] for r in rows)
    assert all(f.n_tasks == 0 and f.not_judged == 3 for f in summarize(rows).figures())


def test_coverage_is_not_asked_without_a_reference():
    judge = PlantedJudge()
    rows = judged(["arag", "naive"], [Pair("arag", "naive")], judge, n=3, reference=False)
    skipped = [r for r in rows if r.get("skip_reason")]
    assert {r["dimension"] for r in skipped} == {"coverage"} and len(skipped) == 6
    assert judge.calls == 3 * 2 * 2


def test_three_systems_are_ranked_with_cis_from_the_rows_alone():
    pairs = [Pair("arag", "naive"), Pair("arag", "stuffing"), Pair("naive", "stuffing")]
    rows = judged(list(QUALITY), pairs, PlantedJudge(bias=0.2), n=20, repeats=2)
    summary = summarize(rows)
    for dim, ranking in summary.ranking.items():
        assert [s.run for s in ranking] == ["arag", "naive", "stuffing"], dim
        assert all(s.ci_low <= s.strength <= s.ci_high for s in ranking)
    assert summary.ranking["overall"][0].ci_low > summary.ranking["overall"][2].ci_high
    # repeats are averaged per task: 20 tasks, 40 judged outcomes
    assert {f.n_tasks for f in summary.figures()} == {20}
    assert {f.resolved for f in summary.figures()} == {40}
    assert metrics_of(summary) == metrics_of(summarize([dict(r) for r in rows]))


def test_a_panel_judge_has_its_own_figures_and_the_judges_agreement_is_reported():
    tasks, corpus = dataset(15)
    answers = {s: answers_of(records(s, 15)) for s in ("arag", "naive")}
    planned = plan([Pair("arag", "naive")], answers, tasks, corpus, PlantedJudge(), 200_000)
    rows = verdict_rows(planned, {"first": PlantedJudge(), "second": PlantedJudge(bias=0.5)})
    summary = summarize(rows)
    assert summary.judges == ["first", "second"]
    assert summary.of("first")["position_inconsistency"] == 0.0
    assert summary.of("second")["position_inconsistency"] > 0.2
    metrics = metrics_of(summary)
    assert "pairwise_panel_second_overall_arag_vs_naive_win_rate" in metrics
    assert "pairwise_judge_agreement_overall" in metrics


def test_with_the_offline_model_as_judge_nothing_is_asked_and_the_run_says_why(make_cfg,
                                                                            tmp_path):
    from mlflow import MlflowClient

    from runners.pairwise import judge_pairs
    from runners.settings import read

    settings = read(make_cfg("judge=offline", "judge.pairwise=true"))
    client = MlflowClient(tracking_uri=settings.config.tracking.uri)
    experiment = client.create_experiment("pairwise")
    run = client.create_run(experiment)
    judge_pairs(client, {"run_id": run.info.run_id, "experiment_id": experiment,
                         "sweep_dir": str(tmp_path)}, [settings])
    tags = client.get_run(run.info.run_id).data.tags
    assert "the offline model is not a judge" in tags["pairwise_skipped"]
    assert not client.list_artifacts(run.info.run_id)


def test_the_key_finding_states_the_preference_and_the_absolute_scores_each_as_they_show():
    from report.pairwise import PairwiseView, per_task

    pairs = [Pair("arag", "naive"), Pair("arag", "stuffing")]
    view = PairwiseView(judged(list(QUALITY), pairs, PlantedJudge(), n=8), "", 0.01, 96, 0)
    runs = [{"run": s, "run_id": f"id-{s}"} for s in QUALITY]
    # absolute coverage: naive above arag (the judge disagrees), arag above stuffing (agrees)
    scores = {"arag": 3.0, "naive": 4.0, "stuffing": 2.0}
    records = {f"id-{s}": [{"id": f"t{i}", "geval_coverage": v} for i in range(8)]
               for s, v in scores.items()}
    text = finding(view, runs, records, "geval_coverage")
    naive, stuffing = text.split("Pairwise judge (overall), ")[1:3]
    assert naive.startswith("arag vs naive: arag beats naive; arag wins 8 of 8 tasks")
    assert "sign test p=0.00781" in naive  # 2 / 2^8: significant, so "beats"
    assert ("The absolute scores, a separate measure: `geval_coverage`, arag minus naive by "
            "its direction: -1.000, 95% CI [-1.000, -1.000].") in naive
    assert stuffing.startswith("arag vs stuffing: arag beats stuffing")
    assert "agree" not in text
    assert "Bradley-Terry ranking on overall" in section_of(claims(view, runs, records, "x"))
    assert "arag vs naive (overall): <b>arag</b>" in per_task(view)["t0"]
    skipped = PairwiseView([], "judge=offline: the offline model is not a judge", 0.0, 0, 0)
    assert "not judged (judge=offline" in finding(skipped, runs, records, "geval_coverage")


def test_each_run_reads_the_verdict_from_its_own_side_on_its_trace():
    from metrics.pairwise import RATIONALE_CHARS, trace_verdicts

    judge = PlantedJudge(bias=0.4, unreadable=frozenset({"Revenue rose 3 percent."}))
    rows = verdict_rows(plan([Pair("arag", "naive")], {
        s: answers_of(records(s, 8, repeats=2)) for s in ("arag", "naive")}, *dataset(8),
        judge, 200_000), {"planted": judge, "second": PlantedJudge()})
    found = [o for o in outcomes(rows) if o.judge == "planted"]
    verdicts = trace_verdicts(outcomes(rows), "planted")
    # the primary judge only, one verdict per run, task and dimension (the first repeat's)
    assert {v.judge for v in verdicts} == {"planted"}
    assert len(verdicts) == 2 * 8 * len(DIMENSIONS)
    first = {(o.task_id, o.dimension): o for o in found if o.repeat == 0}
    seen = set()
    for v in verdicts:
        other = "naive" if v.run == "arag" else "arag"
        assert v.name.startswith("pairwise_") and v.name.endswith(f"_vs_{other}")
        o = first[(v.task_id, v.name.split("_")[1])]
        seen.add(o.status)
        assert v.value == {"unreadable": "unreadable",
                           "inconsistent": "tie (position-inconsistent)"}.get(
            o.status, "tie" if o.winner == "tie" else "win" if o.winner == v.run else "loss")
        assert v.rationale.count(" shown first, ") == 2
        assert all((r["reply"] or "")[:RATIONALE_CHARS] in v.rationale for r in o.rows)
    assert seen == {"decided", "inconsistent", "unreadable"}
    assert {v.value for v in verdicts} >= {"win", "loss", "tie (position-inconsistent)",
                                           "unreadable"}


def test_pairs_are_each_agent_against_each_baseline_or_every_pair_of_contenders():
    from arag.config import PairwisePairs
    from report.policy import no_pair, pairs_of

    runs = [{"run": "arag", "agentic": True, "n_answered": 2},
            {"run": "naive"}, {"run": "stuffing"}, {"run": "oracle", "bound": True},
            {"run": "mute", "agentic": True, "n_answered": 2, "tasks_without_tool_call": 2}]
    assert pairs_of(runs, PairwisePairs.agent_baselines) == [Pair("arag", "naive"),
                                                             Pair("arag", "stuffing")]
    every = pairs_of(runs, PairwisePairs.all)
    assert len(every) == 6 and not any("oracle" in (p.a, p.b) for p in every)
    assert pairs_of(runs[1:3], PairwisePairs.agent_baselines) == []
    assert "judge.pairwise_pairs=all" in no_pair(runs[1:3])
    assert no_pair(runs[:1]) == "fewer than two compared runs"


def test_the_sweeps_runs_differ_in_judge_or_dataset_and_cannot_be_judged_pairwise():
    from metrics.pairwise import unjudgeable

    one = {"judge": {"name": "haiku"}, "dataset": {"name": "ectsum"}, "task_type": "summary"}
    assert unjudgeable([one, dict(one)]) == ""
    other = {**one, "dataset": {"name": "sample"}}
    assert "differ in dataset" in unjudgeable([one, other])


def test_the_judging_is_logged_to_the_parent_run_and_on_both_answers_traces(tmp_path):
    import json
    import time
    from pathlib import Path

    import mlflow

    from arag.records import Prediction
    from metrics.pairwise import trace_verdicts
    from tracking import sqlite_store
    from tracking.runs import log_pairwise
    from tracking.traces import log_task_traces

    sqlite_store.create(tmp_path / "mlflow.db")  # copied from the migrated template: faster
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    try:
        client = mlflow.MlflowClient()
        experiment = client.create_experiment("pairwise", artifact_location=str(tmp_path / "a"))
        ids = {s: client.create_run(experiment).info.run_id for s in ("arag", "naive", "parent")}
        for system in ("arag", "naive"):  # a trace for tasks t0 and t1, none for t2
            log_task_traces(experiment, ids[system], [Prediction(
                id=f"t{i}", source="sample", system=system, model="offline",
                task_type="summary", question="Summarize.", doc_ids=[f"d{i}"],
                ground_truth="", predicted="x", started_at=time.time(), latency_ms=1.0)
                for i in range(2)])
        traces = {s: {t.info.trace_metadata["task_id"]: t.info.trace_id for t in
                      mlflow.search_traces(locations=[experiment], run_id=ids[s],
                                           return_type="list", include_spans=False)}
                  for s in ("arag", "naive")}
        rows = judged(["arag", "naive"], [Pair("arag", "naive")], PlantedJudge(), n=3)
        metrics = metrics_of(summarize(rows))
        verdicts = trace_verdicts(outcomes(rows), "planted")
        assert log_pairwise(client, ids["parent"], rows, metrics, verdicts, traces) == \
            2 * 2 * len(DIMENSIONS)
        stored = Path(client.download_artifacts(ids["parent"], "pairwise.jsonl",
                                                str(tmp_path / "d"))).read_text("utf-8")
        assert [json.loads(line) for line in stored.splitlines()] == rows
        assert client.get_run(ids["parent"]).data.metrics == pytest.approx(metrics)
        found = mlflow.get_trace(traces["naive"]["t0"]).info.assessments
        assert {(a.name, a.value) for a in found} == {
            (f"pairwise_{d}_vs_arag", "loss") for d in DIMENSIONS}
        assert {a.source.source_id for a in found} == {"planted"}
    finally:
        mlflow.set_tracking_uri(None)


class LengthJudge(ChatModel):
    """Quality plays no part: prefers the longer summary, except on tasks whose number is a
    multiple of 5 (a fifth of each group), in both orders alike."""

    provider = "planted"
    name = "length"

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto") -> Completion:
        first, second = SUMMARY.search(messages[-1]["content"]).groups()
        task = int(first.split()[2])
        longer_first = len(first.split()) > len(second.split())
        first_wins = longer_first != (task % 5 == 0)
        return Completion([{"type": "text", "text": f"x\nWinner: {'A' if first_wins else 'B'}"}],
                          "end_turn", Usage(10, 5), self.name)


def test_a_judge_preferring_the_longer_answer_is_length_controlled_to_near_half_and_warned():
    from report.pairwise import PairwiseView

    n = 40  # arag is the longer on 30 of 40 tasks, naive on the other 10
    padded = {s: [{"id": f"t{i}", "repeat": 0, "predicted": f"{s} summary {i}"
                   + " detail" * (20 if (i % 4 != 0) == (s == "arag") else 0)}
                  for i in range(n)] for s in ("arag", "naive")}
    tasks, corpus = dataset(n)
    answers = {s: answers_of(padded[s]) for s in padded}
    rows = verdict_rows(plan([Pair("arag", "naive")], answers, tasks, corpus, LengthJudge(),
                             200_000, ["overall"]), {"length": LengthJudge()})
    figures = summarize(rows).figures()[0]
    assert figures.win_rate == pytest.approx(26 / 40)  # raw: arag looks better
    assert figures.length.win_rate == pytest.approx(0.5, abs=0.05)
    assert metrics_of(summarize(rows))["pairwise_overall_arag_vs_naive_lc_win_rate"] \
        == figures.length.win_rate
    runs = [{"run": s, "run_id": s} for s in padded]
    text = finding(PairwiseView(rows, "", 0.0, len(rows), 0), runs, {}, "geval_coverage")
    assert "**Warning: the pairwise judge may prefer length:**" in text
    assert "arag's answers are systematically longer" in text


def _outcomes(pair: Pair, winners: list[str]) -> list:
    from metrics.pairwise import Outcome

    return [Outcome("j", pair, "overall", f"t{i}", 0, "decided", w, [])
            for i, w in enumerate(winners)]


def test_a_preference_below_significance_is_ahead_not_significant_and_never_beats():
    from metrics.pairwise import pair_figures

    pair = Pair("arag", "naive")
    figures = pair_figures(_outcomes(pair, ["arag", "arag", "arag", "naive", "tie", "tie"]))
    assert figures.sign_test_p == pytest.approx(0.625)
    text = _pair_sentence(figures, None, "geval_coverage")
    assert "arag ahead of naive, not significant" in text and "beats" not in text
    behind = pair_figures(_outcomes(pair, ["naive", "naive", "arag"]))
    assert "naive ahead of arag, not significant" in _pair_sentence(behind, None, "x")


def test_bradley_terry_counts_a_tie_as_half_a_win_each_way_as_a_plain_likelihood_fit_does():
    """The weighted Bradley-Terry log-likelihood (a win weight 1, a tie 1/2 each way),
    maximised by scipy with no regularisation, against the fitted strengths."""
    from scipy.optimize import minimize

    from metrics.pairwise import bradley_terry

    plan_ = {Pair("a", "b"): ["a"] * 3 + ["b"] + ["tie"] * 4,
             Pair("b", "c"): ["b"] * 3 + ["c"] * 2 + ["tie"] * 2,
             Pair("a", "c"): ["a"] * 4 + ["c"] + ["tie"] * 3}
    found = [o for pair, winners in plan_.items() for o in _outcomes(pair, winners)]
    runs = ["a", "b", "c"]

    def negative_log_likelihood(theta):
        total = 0.0
        for pair, winners in plan_.items():
            i, j = runs.index(pair.a), runs.index(pair.b)
            p_a = 1 / (1 + np.exp(theta[j] - theta[i]))
            for w in winners:
                share = 0.5 if w == "tie" else float(w == pair.a)
                total -= share * np.log(p_a) + (1 - share) * np.log(1 - p_a)
        return total

    plain = minimize(negative_log_likelihood, np.zeros(3)).x
    plain -= plain.mean()
    fitted = {s.run: s.strength for s in bradley_terry(found, resamples=2)}
    assert [fitted[r] for r in runs] == pytest.approx(list(plain), abs=0.02)


def finding(view, runs, records, key: str) -> str:
    """The key finding's pairwise sentences, as report.md says them."""
    return " ".join(say(c) for c in claims(view, runs, records, key) if c.section == "Key finding")


def _pair_sentence(figures, absolute, key: str) -> str:
    return say(preference(figures, absolute, key))
