"""What to ship: the cost-quality frontier, routing policies scored out of sample, the budget
and the recommendation (metrics/routing.py, report/analyses/frontier.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metrics.routing import Tasks, cascade, route_cost
from report.model import Claim
from report.report import build_report
from report.writers.cells import MARKDOWN, PLAIN
from report.writers.words import WORDS, say
from runners.validation import ConfigError, check_policies, validate_config
from tests.conftest import compose_cfg
from tests.test_report import rec, row

N = 80


def planted(seed: int = 0, n: int = N, coin: bool = False, cheap_cost: float = 0.01,
            dear_cost: float = 0.05) -> tuple[dict, list[int]]:
    """``stuffing`` good on the shorter half of the documents, ``arag`` on the longer half
    (``coin``: each task's better system a fair coin), at different costs."""
    rng = np.random.default_rng(seed)
    tokens = sorted(int(t) for t in rng.integers(2_000, 20_000, size=n))
    good = {"stuffing": [], "arag": []}
    for k in range(n):
        short = rng.random() < 0.5 if coin else k < n // 2
        good["stuffing"].append(short)
        good["arag"].append(not short)
    records = {name: [rec(f"t{k}", None, tokens[k], doc_ids=[f"d{k}"],
                          rouge2_f1=float(rng.uniform(0.5, 0.7) if good[name][k]
                                          else rng.uniform(0.1, 0.3)),
                          cost_usd_uncached=cost, latency_ms=100.0 if cost == cheap_cost else 900.0,
                          fits_context=bool(rng.random() < 0.5) if coin else k < n // 2)
                      for k in range(n)]
               for name, cost in (("stuffing", cheap_cost), ("arag", dear_cost))}
    return records, tokens


def rows_for(records: dict, **extra) -> list[dict]:
    return [row(name, long_context=name == "stuffing", **extra) for name in records]


def analysis(records: dict, rows: list[dict] | None = None, **options):
    _, data = build_report(rows or rows_for(records), records, "t", ["rouge2_f1"],
                           options=options)
    return data["analysis"]


def shipped(a) -> list[Claim]:
    return [c for c in a.claims if c.section == "What to ship"]


def by_name(a) -> dict[str, dict]:
    return {r["name"]: r for r in a.artifacts["frontier.jsonl"]}


def routers(a) -> dict[str, dict]:
    return {r["policy"]: r for r in a.artifacts["routers.jsonl"]}


def test_a_planted_length_crossover_routes_by_length_out_of_sample_and_is_recommended():
    records, tokens = planted()
    a = analysis(records)
    front, policies = by_name(a), routers(a)
    threshold = policies["threshold"]
    assert threshold["rule"]["below"] == "stuffing" and threshold["rule"]["above"] == "arag"
    # beats each single system out of sample, with a CI above 0 against the best of them
    assert threshold["diff_ci_low"] > 0
    assert threshold["quality_oos"] > max(front["stuffing"]["quality"], front["arag"]["quality"])
    # the fitted threshold lies within one decile of the planted one (the median length)
    deciles = np.quantile(tokens, np.linspace(0.1, 0.9, 9))
    assert deciles[3] <= threshold["rule"]["threshold"] <= deciles[5]
    claim = next(c for c in shipped(a) if c.kind == "route" and c.figures["policy"] == "threshold")
    assert claim.figures["better"] and claim.p_adjusted is not None and claim.p_adjusted < 0.05
    [recommended] = [c for c in shipped(a) if c.kind == "recommendation"]
    assert recommended.decisive and recommended.authority.name == "recommendation"
    assert recommended.runs[0] == "policy:threshold" and front["policy:threshold"]["recommended"]
    command = recommended.figures["command"]
    assert command.startswith("python run.py system=routed 'system.rule={feature: "
                              "document_tokens, threshold: ")
    assert "below: stuffing, above: arag}'" in command
    # costs are per task from the records, the policy's the mix of its members'
    share = threshold["shares"]["arag"]
    assert threshold["cost_usd_per_task"] == pytest.approx(0.01 * (1 - share) + 0.05 * share)
    # the oracle is a bound, in sample, and the regret is measured against it
    oracle = policies["oracle"]
    assert oracle["rule"]["in_sample"] and oracle["quality_oos"] >= threshold["quality_oos"]
    assert threshold["regret"] == pytest.approx(oracle["quality_oos"] - threshold["quality_oos"])
    # the fits policy (stuffing where the document fits) is the same split here
    assert policies["fits"]["diff_ci_low"] > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_fair_coin_pair_claims_no_threshold_or_fits_policy_better(seed):
    records, _ = planted(seed, coin=True)
    a = analysis(records)
    routes = {c.figures["policy"]: c for c in shipped(a) if c.kind == "route"}
    for name in ("threshold", "fits"):
        assert not routes[name].figures["better"]
    [recommended] = [c for c in shipped(a) if c.kind == "recommendation"]
    assert recommended.runs[0] not in ("policy:threshold", "policy:fits")


def test_a_costlier_file_of_equal_quality_is_dominated():
    records, _ = planted()
    records["copy"] = [{**r, "cost_usd_uncached": 0.2} for r in records["arag"]]
    front = by_name(analysis(records))
    assert "arag" in front["copy"]["dominated_by"]
    assert not front["arag"]["dominated_by"] or "copy" not in front["arag"]["dominated_by"]
    assert not front["copy"]["recommended"]


def test_a_budget_below_the_best_policys_cost_changes_the_recommendation_and_meets_it():
    records, _ = planted()
    before = analysis(records)
    [first] = [c for c in shipped(before) if c.kind == "recommendation"]
    cost = first.figures["cost_usd_per_task"]
    budget = cost * 0.7
    after = analysis(records, budget={"cost_usd_per_task": budget})
    [second] = [c for c in shipped(after) if c.kind == "recommendation"]
    assert second.runs[0] != first.runs[0]
    assert second.figures["cost_usd_per_task"] <= budget
    assert second.figures["why"] == "budget" and second.difference is not None
    assert second.difference < 0  # what it gives up against the best overall
    assert by_name(after)[second.runs[0]]["recommended"]
    # nothing within a budget of nothing: it says so and recommends nothing
    none = analysis(records, budget={"cost_usd_per_task": 0.001})
    assert [c.kind for c in shipped(none) if c.kind in ("recommendation", "nothing_fits")] == [
        "nothing_fits"]
    assert not any(r["recommended"] for r in none.artifacts["frontier.jsonl"])
    # a latency budget holds the P90 latency
    fast = analysis(records, budget={"latency_ms_p90": 500})
    [quick] = [c for c in shipped(fast) if c.kind == "recommendation"]
    assert quick.figures["latency_ms_p90"] <= 500


def test_a_cascade_escalates_exactly_the_declined_tasks_and_costs_the_sum():
    records, _ = planted()
    declined = {3, 10, 11, 40, 55, 70}
    records["stuffing"] = [
        {**r, "skipped": True, "rouge2_f1": None, "skip_reason": "too long",
         "cost_usd_uncached": 0.0} if k in declined else r
        for k, r in enumerate(records["stuffing"])]
    a = analysis(records, cascade=["stuffing", "arag"])
    cas = routers(a)["cascade"]
    assert cas["rule"] == {"order": ["stuffing", "arag"]}
    assert cas["shares"]["arag"] == pytest.approx(len(declined) / N)
    expected = (0.01 * (N - len(declined)) + 0.0 * len(declined) + 0.05 * len(declined)) / N
    assert cas["cost_usd_per_task"] == pytest.approx(expected)
    [claim] = [c for c in shipped(a) if c.kind == "route" and c.figures["policy"] == "cascade"]
    assert claim.figures["escalated"] == len(declined) and claim.n_tasks == N
    # the statistic itself: escalated == declined, cost == first + second where escalated
    rng = np.random.default_rng(0)
    cost = rng.uniform(0.01, 0.1, size=(2, 20))
    mask = rng.random(20) < 0.3
    tasks = Tasks(["a", "b"], rng.random((2, 20)), cost, np.ones((2, 20)),
                  np.vstack([mask, np.zeros(20, bool)]), np.arange(20))
    route = cascade(tasks, [0, 1])
    assert route.escalated is not None and (route.escalated == mask).all()
    assert np.allclose(route_cost(tasks, route), cost[0] + mask * cost[1])


def test_unknown_cost_is_unknown_never_zero_and_never_dominated():
    records, _ = planted()
    records["arag"] = [{**r, "cost_usd_uncached": None, "cost_usd": None} for r in records["arag"]]
    a = analysis(records)
    front = by_name(a)
    assert front["arag"]["cost_usd_per_task"] is None and front["arag"]["dominated_by"] == []
    [said] = [c for c in shipped(a) if c.kind == "unknown_cost"]
    assert said.runs == ("arag",) and not said.decisive
    assert not [n for n in a.notes if n.section == "What to ship"]  # the section says it


def test_one_system_says_there_is_no_frontier_and_a_sequential_sweep_recommends_nothing():
    records, _ = planted()
    one = analysis({"arag": records["arag"]})
    assert [c.kind for c in shipped(one)] == ["no_frontier"]
    assert "frontier.jsonl" not in one.artifacts
    seq = analysis(records, rows_for(records, sequential={"order_seed": 0, "max_tasks": None}))
    assert not [c for c in shipped(seq) if c.kind == "recommendation"]
    assert any(c.kind == "frontier_descriptive" for c in shipped(seq))
    assert all(not c.decisive for c in shipped(seq))


def test_every_claim_and_note_of_the_section_has_its_words(tmp_path):
    records, _ = planted()
    a = analysis(records)
    said = [*shipped(a), Claim("no_frontier", "What to ship", ("x",), "rouge2_f1",
                                figures={"runs": 1}),
            Claim("unknown_cost", "What to ship", ("x",), "rouge2_f1", figures={"runs": 1}),
            Claim("frontier_descriptive", "What to ship", ("x", "y"), "rouge2_f1"),
            *shipped(analysis(records, budget={"cost_usd_per_task": 0.001}))]
    for item in said:
        assert say(item, MARKDOWN).strip() and say(item, PLAIN, short=True).strip()
        assert item.kind in WORDS  # its own words, not the generic ones
    [draw] = [p for p in a.plots if p(tmp_path) is not None and (tmp_path / "frontier.png").exists()]
    assert (tmp_path / "frontier.png").stat().st_size > 0


@pytest.mark.parametrize(("override", "says"), [
    ("report.budget.cost_usd_per_task=-1", "report.budget.cost_usd_per_task"),
    ("report.budget.cost_usd_per_task=nan", "report.budget.cost_usd_per_task"),
    ("report.budget.latency_ms_p90=inf", "report.budget.latency_ms_p90"),
    ("report.route_by=[evidence_position]", "comes from the gold"),
    ("report.route_by=[doc_tokens]", "report.route_by names 'doc_tokens'"),
    ("report.cascade=[naive]", "a cascade of one system"),
    ("system=routed", "needs system.rule or system.cascade"),
    ("system=routed system.cascade=[naive]", "a cascade of one system"),
    ("system=routed system.cascade=[naive,agentic]", "'agentic', which is not a system option"),
    ("system=routed system.rule={feature: document_tokens, threshold: inf, below: stuffing, "
     "above: arag}", "not a finite number"),
    ("system=routed system.rule={feature: document_tokens, threshold: 6000, below: stuffing, "
     "above: big_rag}", "'big_rag', which is not a system option"),
    ("system=routed system.rule={feature: evidence_position, threshold: 0.5, below: stuffing, "
     "above: arag}", "not a feature known before any system answers"),
])
def test_bad_routing_input_is_refused_before_anything_runs_with_the_fix(override, says):
    with pytest.raises(ConfigError, match="Fix:") as err:
        validate_config(compose_cfg(override.split(" ") if "rule=" not in override
                                    else ["system=routed", override.split(" ", 1)[1]]))
    assert says in str(err.value)


def test_a_report_cascade_naming_a_system_not_in_the_sweep_is_refused():
    configs = [compose_cfg([f"system={s}", "report.cascade=[naive,agentic_rag]"])
               for s in ("naive", "arag")]
    with pytest.raises(ConfigError, match="'agentic_rag', which is not a system of this sweep"):
        check_policies(configs)
    check_policies([compose_cfg([f"system={s}", "report.cascade=[naive,arag]"])
                    for s in ("naive", "arag")])


def pipeline_files(tmp_path, n_docs: int = 40):
    """A mini dataset of ``n_docs`` transcripts of growing length, and two prediction files:
    ``short.jsonl`` copies the reference on the shorter half ($0.01 a task), ``long.jsonl``
    on the longer half ($0.04); elsewhere each answers with the transcript's first line."""
    from tests.conftest import write_mini_dataset

    root = write_mini_dataset(tmp_path / "mini", n_docs=n_docs)
    tasks = [json.loads(line) for line in (root / "tasks.jsonl").read_text().splitlines()]
    for k, task in enumerate(tasks):
        doc = root / "documents" / f"{task['doc_ids'][0]}.txt"
        doc.write_text(doc.read_text() + "".join(
            f"Region {i} added customers in line with plan.\n" for i in range(10 * k)))
    for name, cost, copies in (("short", 0.01, lambda k: k < n_docs // 2),
                               ("long", 0.04, lambda k: k >= n_docs // 2)):
        lines = [json.dumps({"id": t["id"], "cost_usd": cost, "latency_ms": 50.0 + 100 * cost,
                             "predicted": t["reference"] if copies(k) else
                             "Good morning and welcome to the conference call."})
                 for k, t in enumerate(tasks)]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return root, tasks


@pytest.mark.slow  # a two-run sweep through Hydra, MLflow and the real ROUGE scorer
def test_a_sweep_of_two_prediction_files_logs_the_frontier_and_the_routers(tmp_path):
    from tests.conftest import all_runs, client_for, run_cli

    root, tasks = pipeline_files(tmp_path)
    result = run_cli(tmp_path, "system=external", f"dataset.root={root}",
                     f"system.predictions={tmp_path / 'short.jsonl'},{tmp_path / 'long.jsonl'}",
                     "metrics.scorers=[rouge,length]", "report.decide_on=[rouge2_f1]")
    assert result.returncode == 0, result.stderr[-3000:]
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    client = client_for(tmp_path)

    def read(name: str) -> list[dict]:
        path = client.download_artifacts(parent.info.run_id, name, str(tmp_path / "art"))
        return [json.loads(line) for line in Path(path).read_text().splitlines() if line]

    front = {r["name"]: r for r in read("frontier.jsonl")}
    assert set(front["short"]) == {"name", "kind", "quality", "quality_ci_low",
                                   "quality_ci_high", "cost_usd_per_task", "cost_ci_low",
                                   "cost_ci_high", "latency_ms_p50", "latency_ms_p90",
                                   "dominated_by", "recommended"}
    assert front["short"]["cost_usd_per_task"] == pytest.approx(0.01)
    assert front["long"]["cost_usd_per_task"] == pytest.approx(0.04)
    routes = {r["policy"]: r for r in read("routers.jsonl")}
    assert set(routes["threshold"]) == {"policy", "rule", "quality_oos", "best_single",
                                        "diff_vs_best_single", "diff_ci_low", "diff_ci_high",
                                        "cost_usd_per_task", "shares", "regret"}
    threshold = routes["threshold"]
    assert (threshold["rule"]["below"], threshold["rule"]["above"]) == ("short", "long")
    assert threshold["diff_ci_low"] > 0 and front["policy:threshold"]["recommended"]
    sizes = sorted(len((root / "documents" / f"{t['doc_ids'][0]}.txt").read_text()) // 4
                   for t in tasks)
    deciles = np.quantile(sizes, np.linspace(0.1, 0.9, 9))
    assert deciles[3] <= threshold["rule"]["threshold"] <= deciles[5]
    plots = [f.path for f in client.list_artifacts(parent.info.run_id, "plots")]
    assert "plots/frontier.png" in plots


def test_where_every_system_costs_the_same_cost_chooses_nothing():
    """The offline model's $0 everywhere: no system is 'the cheapest', nothing is shipped."""
    free, _ = planted(coin=True, cheap_cost=0.0, dear_cost=0.0)  # no policy beats the best
    [said] = [c for c in shipped(analysis(free)) if c.kind == "recommendation"]
    text = say(said, PLAIN, short=True)
    assert not said.decisive and text.startswith("Nothing to ship on cost"), text
    assert "Ship " not in text and "cheapest point" not in text
