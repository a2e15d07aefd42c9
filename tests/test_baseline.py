"""A sweep held against a baseline sweep (report.baseline, python -m report compare): what
is refused, what is compared, and when a regression is declared. Sweeps are built in
memory here; tests/test_baseline_sweep.py runs real ones."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from arag.config import ConfigError
from metrics.aggregate import task_means
from metrics.stats import paired_difference
from report import baseline as bl
from report.baseline import NotComparable, Options, Rule, Sweep, compare
from report.baseline_report import (
    EXIT_STATUS,
    INCONCLUSIVE_EXIT,
    REGRESSION_EXIT,
    exit_status,
    markdown,
    outcome,
    parse_map,
    parse_rules,
)

TASKS = [f"t{i}" for i in range(8)]
ROUGE = [0.30, 0.25, 0.28, 0.35, 0.22, 0.31, 0.27, 0.33]
PARAMS = {"dataset.name": "sample", "metrics.rouge.use_stemmer": "True",
          "metrics.bertscore.batch_size": "32", "judge.name": "none"}


def run(name: str, params: dict[str, str] | None = None, system: str | None = None):
    return SimpleNamespace(
        info=SimpleNamespace(run_id=f"id-{name}", run_name=name, experiment_id="1",
                             status="FINISHED"),
        data=SimpleNamespace(params={**PARAMS, **(params or {})},
                             tags={"system": system or name}))


def records(values: list[float], ids: list[str] = TASKS, **extra) -> list[dict]:
    return [{"id": t, "rouge2_f1": v, "latency_ms": 100.0, "cost_usd": 0.0, **extra}
            for t, v in zip(ids, values, strict=True)]


def sweep(runs: dict[str, list[dict]], params: dict[str, str] | None = None,
          parent_id: str = "parent") -> Sweep:
    parent = SimpleNamespace(info=SimpleNamespace(run_id=parent_id, run_name="sweep system=naive",
                                                  experiment_id="1"),
                             data=SimpleNamespace(params={}, tags={}))
    return Sweep(parent, {n: run(n, params) for n in runs}, runs)


@pytest.fixture(autouse=True)
def no_traces(monkeypatch):
    """Trace links come from the MLflow store, which these in-memory sweeps lack."""
    monkeypatch.setattr(bl, "trace_ids", lambda exp, runs: {})


def options(*rules: str, **kw) -> Options:
    return Options(rules=parse_rules(rules), decide_on=["rouge2_f1"], **kw)


def test_a_lower_score_beyond_the_margin_is_a_regression_naming_system_metric_and_amount():
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"naive": records([v - 0.1 for v in ROUGE])}, parent_id="cand")
    result = compare(base, cand, options("rouge2_f1:0.01"))
    assert result["decision"] == "regressed"
    assert EXIT_STATUS[result["decision"]] == REGRESSION_EXIT
    [reg] = result["regressions"]
    assert (reg["system"], reg["metric"]) == ("naive", "rouge2_f1")
    assert reg["diff"] == pytest.approx(-0.1)
    text = outcome(result)
    assert "naive" in text and "rouge2_f1" in text and "0.1000" in text
    cell = result["systems"][0]["metrics"]["rouge2_f1"]
    assert len(cell["flipped"]) == 8 and {f["direction"] for f in cell["flipped"]} == {"worse"}
    assert "worse: `t0`" in markdown(result)


def test_a_drop_whose_ci_reaches_beyond_the_margin_is_inconclusive_not_passed():
    """Non-inferiority: a CI that allows a drop beyond the margin does not pass, and one
    that reaches inside it is no regression either: the gate says it cannot tell."""
    drops = [0.0, -0.2, 0.05, -0.1, 0.0, -0.15, 0.02, -0.05]
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"naive": records([v + d for v, d in zip(ROUGE, drops, strict=True)])})
    result = compare(base, cand, options("rouge2_f1:0.01"))
    cell = result["systems"][0]["metrics"]["rouge2_f1"]
    assert cell["ci_low"] < -0.01 < cell["ci_high"]
    assert result["decision"] == "inconclusive" and not result["regressions"]
    assert exit_status(result) == INCONCLUSIVE_EXIT not in (0, 1, 2, REGRESSION_EXIT)
    [rule] = result["inconclusive"]
    text = outcome(result)
    assert text.startswith("INCONCLUSIVE: naive on rouge2_f1") and "No regression" not in text
    assert f"[{cell['ci_low']:+.4f}, {cell['ci_high']:+.4f}]" in text
    assert "the margin 0.01" in text and f"about {rule['tasks_to_settle']} paired tasks" in text
    relaxed = compare(base, cand, options("rouge2_f1:0.01", on_inconclusive="pass"))
    assert exit_status(relaxed) == 0 and "does not fail on it" in outcome(relaxed)


def test_a_ci_within_the_margin_passes_and_one_wholly_beyond_it_regresses():
    """The issue's case: a CI of [-0.043, +0.050] against a margin of 0.01 is not a pass;
    the same CI against a margin of 0.05 is."""
    cell = {"n": 20, "diff": 0.0035, "ci_low": -0.043, "ci_high": 0.050}
    assert bl.gate(cell, Rule("rouge2_f1", 0.01), "rouge2_f1")["outcome"] == "inconclusive"
    assert bl.gate(cell, Rule("rouge2_f1", 0.05), "rouge2_f1")["outcome"] == "pass"
    below = {"n": 20, "diff": -0.08, "ci_low": -0.1, "ci_high": -0.06}
    assert bl.gate(below, Rule("rouge2_f1", 0.05), "rouge2_f1")["outcome"] == "regression"


def test_the_tasks_that_would_settle_a_gate_follow_the_ci_narrowing_as_one_over_sqrt_n():
    # mean advantage +0.0035, half-width 0.0465, margin 0.01: the CI's worse bound reaches
    # -0.01 when the half-width is 0.0135, i.e. n * (0.0465 / 0.0135)^2 = 237.3 tasks
    assert bl.tasks_to_settle(20, 0.0035, 0.0465, 0.01) == 238
    assert bl.tasks_to_settle(20, -0.01, 0.05, 0.01) is None  # the mean on the margin


def test_lower_is_better_metrics_regress_when_they_rise(monkeypatch):
    monkeypatch.setattr(bl.policy, "higher_is_better", lambda key: key != "rouge2_f1")
    base = sweep({"naive": records(ROUGE)})
    worse = sweep({"naive": records([v + 0.1 for v in ROUGE])})
    better = sweep({"naive": records([v - 0.1 for v in ROUGE])})
    assert compare(base, worse, options("rouge2_f1:0.01"))["decision"] == "regressed"
    assert compare(base, better, options("rouge2_f1:0.01"))["decision"] == "passed"


def test_a_sweep_against_itself_passes():
    base = sweep({"naive": records(ROUGE)})
    result = compare(base, base, options("rouge2_f1:0.01"))
    assert result["decision"] == "passed"
    assert EXIT_STATUS["passed"] == 0
    assert result["systems"][0]["metrics"]["rouge2_f1"]["diff"] == 0.0


def test_other_data_is_refused_saying_why():
    base = sweep({"naive": records(ROUGE)}, {"dataset.name": "ectsum"})
    cand = sweep({"naive": records(ROUGE)})
    with pytest.raises(NotComparable, match="dataset 'ectsum'.*'sample'.*not comparable"):
        compare(base, cand, options())


def test_a_differing_dataset_digest_is_refused_even_with_the_same_name():
    base = sweep({"naive": records(ROUGE)}, {"dataset_digest": "aaa"})
    cand = sweep({"naive": records(ROUGE)}, {"dataset_digest": "bbb"})
    with pytest.raises(NotComparable, match="digest 'aaa'.*digest 'bbb'"):
        compare(base, cand, options())
    same = compare(base, sweep({"naive": records(ROUGE)}, {"dataset_digest": "aaa"}), options())
    assert same["data"]["digest_check"] == "same"
    unknown = compare(sweep({"naive": records(ROUGE)}), cand, options())
    assert unknown["data"]["digest_check"].startswith("unknown")


def test_too_few_common_tasks_is_refused_unless_the_threshold_is_lowered():
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"naive": records(ROUGE[:4], TASKS[:4])})
    with pytest.raises(NotComparable, match="report.min_overlap=0.9.*report.min_overlap=0.50"):
        compare(base, cand, options())
    result = compare(base, cand, options(min_overlap=0.5))
    assert result["tasks"]["common"] == 4
    assert result["systems"][0]["metrics"]["rouge2_f1"]["n"] == 4


def test_a_metric_scored_with_other_options_is_listed_not_compared():
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"naive": records(ROUGE)}, {"metrics.rouge.use_stemmer": "False",
                                             "metrics.bertscore.batch_size": "8"})
    result = compare(base, cand, Options(decide_on=["rouge2_f1", "latency_ms"]))
    system = result["systems"][0]
    assert "rouge2_f1" not in system["metrics"]
    assert "metrics.rouge.use_stemmer 'True' in the baseline, 'False'" in \
        system["not_comparable"]["rouge2_f1"]
    assert "Not comparable: `rouge2_f1`" in markdown(result)


def test_a_rule_on_a_metric_not_comparable_is_untested_not_passed():
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"naive": records(ROUGE)}, {"metrics.rouge.use_stemmer": "False"})
    result = compare(base, cand, options("rouge2_f1:0.01"))
    assert result["decision"] == "untested"
    assert EXIT_STATUS["untested"] == 2
    assert "NOT TESTED: naive on rouge2_f1" in outcome(result)


def test_repeats_are_paired_by_task_mean():
    base_recs = records(ROUGE, repeat=0) + records([v + 0.02 for v in ROUGE], repeat=1)
    cand_recs = records([v - 0.05 for v in ROUGE])
    result = compare(sweep({"naive": base_recs}), sweep({"naive": cand_recs}), options())
    cell = result["systems"][0]["metrics"]["rouge2_f1"]
    b, c = task_means(base_recs, "rouge2_f1"), task_means(cand_recs, "rouge2_f1")
    expected = paired_difference([c[t] for t in TASKS], [b[t] for t in TASKS])
    assert cell["n"] == 8 and cell["diff"] == pytest.approx(-0.06)
    assert (cell["ci_low"], cell["ci_high"]) == (expected.ci_low, expected.ci_high)


def test_systems_pair_by_name_then_by_mapping_and_unpaired_ones_are_listed():
    base = sweep({"naive": records(ROUGE), "stuffing": records(ROUGE)})
    cand = sweep({"naive top_k=1": records(ROUGE), "arag": records(ROUGE)})
    cand.runs["naive top_k=1"].data.tags["system"] = "naive"
    result = compare(base, cand, options())
    assert [(s["system"], s["baseline_system"]) for s in result["systems"]] == \
        [("naive top_k=1", "naive")]
    assert result["only_in_baseline"] == ["stuffing"]
    assert result["only_in_candidate"] == ["arag"]
    mapped = compare(base, cand, options(mapping={"arag": "stuffing"}))
    assert ("arag", "stuffing") in [(s["system"], s["baseline_system"])
                                    for s in mapped["systems"]]
    with pytest.raises(NotComparable, match="report.baseline_map maps 'x'"):
        compare(base, cand, options(mapping={"x": "naive"}))


def test_p_values_are_holm_adjusted_over_metrics_and_systems():
    drop = [v - 0.1 for v in ROUGE]
    base = sweep({"naive": records(ROUGE), "arag": records(ROUGE)})
    cand = sweep({"naive": records(drop), "arag": records(drop)})
    result = compare(base, cand, Options(decide_on=["rouge2_f1", "latency_ms"]))
    cells = [c for s in result["systems"] for c in s["metrics"].values()]
    tested = [c for c in cells if c["p"] is not None]
    assert len(tested) == 2  # latency never differs: too few untied pairs to test
    assert all(c["p_holm"] == pytest.approx(min(1.0, 2 * c["p"])) for c in tested)


@pytest.mark.parametrize("spec", ["rouge2_f1", "rouge2_f1:x", ":0.1", "rouge2_f1:-1",
                                  "rouge2_f1:nan", "rouge2_f1:inf", "rouge2_f1:1e308"])
def test_a_malformed_fail_on_entry_names_the_key_and_the_fix(spec):
    with pytest.raises(ConfigError, match=r"report.fail_on entry .* Fix: report.fail_on="):
        parse_rules([spec])


def test_two_rules_for_one_metric_are_refused_naming_both_margins():
    with pytest.raises(ConfigError, match=r"two rules for 'rouge2_f1' \(margins 0.01 and 0.2\)"
                       r".*Fix: keep one, e.g. report.fail_on=\[rouge2_f1:0.01\]"):
        parse_rules(["rouge2_f1:0.01", "rouge2_f1:0.2"])


def test_rules_parse():
    assert parse_rules(["rouge2_f1:0.01", "geval_faithfulness: 0.2"]) == \
        [Rule("rouge2_f1", 0.01), Rule("geval_faithfulness", 0.2)]


def test_baseline_map_entries_pair_run_names_and_a_malformed_one_names_the_fix():
    assert parse_map(["naive v2=naive", " arag = arag max_loops=6"]) == \
        {"naive v2": "naive", "arag": "arag max_loops=6"}
    with pytest.raises(ConfigError, match=r"report.baseline_map entry 'naive' .* Fix: "):
        parse_map(["naive"])


def test_no_pair_of_runs_is_refused_with_the_mapping_to_set():
    base = sweep({"naive": records(ROUGE)})
    cand = sweep({"arag": records(ROUGE)})
    with pytest.raises(NotComparable, match=r"Fix: report.baseline_map=\['<candidate run>="):
        compare(base, cand, options())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A real MLflow store holding one sweep: a parent and one job run (one store for the
    module: creating one takes seconds)."""
    from mlflow import MlflowClient

    tmp_path = tmp_path_factory.mktemp("store")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("sample", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep system=naive",
                               tags={"role": "sweep_parent", "sweep_id": "multirun_base",
                                     "release": "v1.4"})
    client.set_terminated(parent.info.run_id, "FINISHED")
    child = client.create_run(exp, run_name="naive",
                              tags={"mlflow.parentRunId": parent.info.run_id})
    return client, parent.info.run_id, child.info.run_id


@pytest.mark.parametrize("ref", ["id", "sweep system=naive", "multirun_base", "release=v1.4"])
def test_a_sweep_is_found_by_id_name_sweep_id_or_tag(store, ref):
    from tracking.sweeps import find_sweep

    client, parent, _ = store
    assert find_sweep(client, parent if ref == "id" else ref).info.run_id == parent


def test_a_job_run_or_unknown_name_is_not_a_baseline_and_the_error_says_what_to_pass(store):
    from tracking.sweeps import SweepNotFound, find_sweep

    client, parent, child = store
    with pytest.raises(SweepNotFound, match=f"is a job run, not a sweep. Fix: report.baseline={parent}"):
        find_sweep(client, child)
    with pytest.raises(SweepNotFound, match="report.baseline='nope': no sweep has"):
        find_sweep(client, "nope")


def test_publishing_tags_links_and_replaces_its_report_section(store, tmp_path):
    from report.baseline_report import SECTION, publish

    client, _, _ = store
    parent = client.create_run("1", run_name="sweep candidate",
                               tags={"role": "sweep_parent"}).info.run_id
    base = sweep({"naive": records(ROUGE)}, parent_id="base-id")
    cand = sweep({"naive": records([v - 0.1 for v in ROUGE])}, parent_id=parent)
    (tmp_path / "report.md").write_text("# Sweep report\n")
    client.log_artifact(parent, str(tmp_path / "report.md"))
    client.set_tag(parent, "mlflow.note.content", "**Verdict**: naive")
    for _ in range(2):  # a second comparison replaces the first's section
        publish(client, compare(base, cand, options("rouge2_f1:0.01")))
    tags = client.get_run(parent).data.tags
    assert tags["regression"] == "true" and tags["baseline_run_id"] == "base-id"
    assert tags["baseline_comparison"].startswith("REGRESSION: naive")
    note = tags["mlflow.note.content"]
    assert note.startswith("**Verdict**: naive") and note.count("Against the baseline") == 1
    assert "(#/experiments/1/runs/base-id)" in note
    report = Path(client.download_artifacts(parent, "report.md", str(tmp_path / "d"))).read_text()
    assert report.startswith("# Sweep report") and report.count(SECTION) == 1
    publish(client, compare(base, base, options("rouge2_f1:0.01")) | {
        "candidate": {**base.describe(), "run_id": parent}})
    assert "regression" not in client.get_run(parent).data.tags


def test_a_rule_on_a_metric_no_record_has_is_untested_saying_so():
    base, cand = sweep({"naive": records(ROUGE)}), sweep({"naive": records(ROUGE)})
    result = compare(base, cand, options("rouge_2:0.01"))
    assert result["decision"] == "untested"
    assert "naive on rouge_2" in outcome(result)
    assert "no task has this score in both runs" in outcome(result)


@pytest.mark.slow  # two commands; the sweep checks its jobs before it looks for the baseline
def test_a_baseline_on_a_single_run_or_one_not_found_stops_before_any_run(tmp_path):
    from tests.conftest import all_runs, run_cli

    single = run_cli(tmp_path, "dataset=sample", "report.baseline=abc", sweep=False)
    assert single.returncode == 2
    assert "report.baseline=abc compares a sweep with a sweep. Fix: run with -m" in single.stderr
    missing = run_cli(tmp_path, "system=naive", "dataset=sample", "report.baseline=nope")
    assert missing.returncode == 2
    assert "report.baseline='nope': no sweep has that run id, name" in missing.stderr
    assert all_runs(tmp_path) == []


def test_a_refusal_already_met_is_said_without_loading_the_sweeps_again(monkeypatch):
    """A sweep's callback holds it against its baseline before its report; a refusal there
    is worded from that one attempt, not by loading both sweeps a second time."""
    import report.baseline_report as gate

    def load_again(*_: object) -> None:
        raise AssertionError("the two sweeps were loaded again")

    monkeypatch.setattr(gate, "run_comparison", load_again)
    refused = NotComparable("the baseline 'b' is on dataset 'sample', the candidate on 'mini'")
    status, said = gate.compare_and_publish(None, "b", "c", Options(), comparison=refused)
    assert status == gate.REFUSED_EXIT
    assert said == "baseline comparison refused: the baseline 'b' is on dataset 'sample', " \
        "the candidate on 'mini'"
