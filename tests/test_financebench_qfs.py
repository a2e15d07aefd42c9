"""dataset=financebench_qfs: query-focused tasks from 10-K sections, silver references.

A tiny upstream-shaped tree with hand-written 10-K PDFs covers section finding, gold,
references written by Claude through the real SDK against the fake Messages API (cached,
spot-checked, failures reported), and tasks without references when no model is set; the
real-data test finds both sections in a real 10-K. The sweep runs the CLI end to end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from arag.datasets import DatasetError, load_dataset
from arag.datasets.financebench_qfs import SECTIONS, find_section, spot_check_ids
from arag.records import Prediction, Task
from metrics import ScoringItem
from metrics.geval import GEvalScorer
from metrics.numeric import NumericScorer
from metrics.text import BertScoreScorer, RougeScorer
from runners.identity import config_hash, predictions_hash
from tests.anthropic_fake import FakeAnthropic, error, text_reply
from tests.conftest import ROOT, SHARED, all_runs, client_for, run_cli
from tests.test_financebench import write_upstream_tree
from tests.test_geval import RuleJudge

FB = SHARED / "financebench"
KEY = "sk-ant-test-qfs"

ZETA_10K = [
    ["ZETA Inc. Annual Report on Form 10-K for the fiscal year 2022."],
    ["Table of Contents", "Item 1. Business 3", "Item 1A. Risk Factors 3",
     "Item 1B. Unresolved Staff Comments 5", "Item 2. Properties 5", "Item 5. Market 5",
     "Item 7. Management's Discussion and Analysis 6", "Item 7A. Market Risk 7",
     "Item 8. Financial Statements and Supplementary Data 8"],
    ["Item 1. Business", "ZETA makes industrial sensors.",
     "For our risks, see Item 1A. Risk Factors of this report.",
     "Item 1A. Risk Factors", "Demand for sensors is cyclical and may fall sharply.",
     "We depend on two suppliers for silicon wafers."],
    ["Rising interest rates could raise our borrowing costs.",
     "A cyber attack could disrupt our plants."],
    ["Item 1B. Unresolved Staff Comments", "None.", "Item 2. Properties",
     "We own three plants."],
    ["Item 7. Management's Discussion and Analysis", "Revenue rose 12% to $840 million in 2022.",
     "Operating margin improved to 18.5% from 16.0%."],
    ["We opened a plant in Ohio and shipped 2.1 million sensors.",
     "Item 7A. Quantitative and Qualitative Disclosures About Market Risk",
     "We hedge our currency exposure."],
    ["Item 8. Financial Statements and Supplementary Data", "Net income was $120 million."],
]
OMEGA_10K = [["OMEGA Corp. annual report.", "Our stores sold more goods this year."]]
DOCS = [("OMEGA_2021_10K", "Omega", "10k", 2021), ("ZETA_2022_10K", "Zeta", "10k", 2022),
        ("ZETA_2023Q1_10Q", "Zeta", "10q", 2023), ("NOPDF_2020_10K", "Nopdf", "10k", 2020)]
RISKS = "zeta's key risks are cyclical demand, two wafer suppliers, rates and cyber attacks."
HIGHLIGHTS = "revenue rose 12% to $840 million; margin 18.5%; a new ohio plant."


def write_tree(root: Path) -> Path:
    return write_upstream_tree(root, DOCS, [], {
        "ZETA_2022_10K": ZETA_10K, "OMEGA_2021_10K": OMEGA_10K,
        "ZETA_2023Q1_10Q": [["Quarterly report."]]})


@pytest.fixture
def tree(tmp_path) -> Path:
    return write_tree(tmp_path / "fb")


def reference_writer(request: dict, n: int) -> dict:
    prompt = request["messages"][-1]["content"]
    return text_reply(RISKS if "risk factors" in prompt.split("<question>")[1] else HIGHLIGHTS,
                      request)


def load(make_cfg, tree: Path, cache: Path, *overrides: str):
    cfg = make_cfg("dataset=financebench_qfs", f"dataset.root={tree}",
                   f"dataset.options.cache_dir={cache}", *overrides)
    return load_dataset(cfg.dataset, ROOT)


def claude(url: str) -> list[str]:
    return ["dataset/reference_model=claude-haiku-4-5",
            f"dataset.reference_model.base_url={url}", "dataset.reference_model.max_retries=0"]


def test_sections_give_two_tasks_per_10k_with_page_gold(make_cfg, tree, tmp_path):
    ds = load(make_cfg, tree, tmp_path / "c")
    assert [t.id for t in ds.tasks] == ["ZETA_2022_10K:risk_factors",
                                        "ZETA_2022_10K:operational_highlights"]
    risk, ops = ds.tasks
    assert (risk.task_type, risk.doc_ids) == ("summarization", ("ZETA_2022_10K",))
    assert risk.question == "What are the key risk factors Zeta describes in its FY2022 10-K? " \
                            "Summarize them."
    assert "operational highlights of Zeta in its FY2022 10-K" in ops.question
    # the table of contents (page 2) and "see Item 1A" (page 3) are not the section start;
    # Item 1B at the top of page 5 ends it on page 4; Item 7A in mid-page 7 ends on page 7
    assert risk.meta["pages"] == [3, 4] and ops.meta["pages"] == [6, 7]
    doc = ds.corpus.documents["ZETA_2022_10K"]
    for task in (risk, ops):
        first, last = task.meta["pages"]
        gold = task.gold_lines["ZETA_2022_10K"]
        assert gold == tuple(i for i, p in enumerate(doc.line_pages, 1) if first <= p <= last)
    assert "A cyber attack could disrupt our plants." in [doc.lines[g - 1] for g in
                                                          risk.gold_lines["ZETA_2022_10K"]]
    # OMEGA's 10-K has no item headings: no task, and the report says why; the 10-Q and the
    # 10-K without a PDF are not used
    report = ds.reports["sections"]
    assert report["n_filings"] == 2 and report["n_sections_not_found"] == 2
    assert "heading outside the table of contents" in \
        report["filings"]["OMEGA_2021_10K"]["risk_factors"]["note"]
    assert list(ds.corpus.documents) == ["ZETA_2022_10K"]


def test_without_a_reference_model_tasks_say_references_need_one(make_cfg, tree, tmp_path):
    ds = load(make_cfg, tree, tmp_path / "c")
    assert all(t.reference == "" for t in ds.tasks)
    assert all("need a real model" in t.meta["reference_missing"] for t in ds.tasks)
    assert any("no silver references" in n and "dataset/reference_model=" in n
               for n in ds.notes)
    assert ds.reports["qfs_references"]["model"] is None
    assert "qfs_spot_check" not in ds.reports


def test_references_from_claude_are_cached_and_spot_checked(make_cfg, tree, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cache = tmp_path / "c"
    with FakeAnthropic(reference_writer) as fake:
        ds = load(make_cfg, tree, cache, *claude(fake.url), "target_length=60")
        first = list(fake.requests)
        again = load(make_cfg, tree, cache, *claude(fake.url), "target_length=60")
        n_again = len(fake.requests) - len(first)
    risk, ops = ds.tasks
    assert (risk.reference, ops.reference) == (RISKS, HIGHLIGHTS)
    assert "reference_missing" not in risk.meta
    # the reference is written from the section's pages only, at the run's target length
    prompt = next(r["json"]["messages"][0]["content"] for r in first
                  if "risk factors" in r["json"]["messages"][0]["content"].split("<question>")[1])
    assert "A cyber attack could disrupt our plants." in prompt
    assert "Revenue rose 12%" not in prompt and "Net income was" not in prompt
    assert "<target_words>60</target_words>" in prompt
    assert len(first) == 2 and n_again == 0  # the second load is served by the cache
    assert [t.reference for t in again.tasks] == [RISKS, HIGHLIGHTS]
    report = ds.reports["qfs_references"]
    assert (report["n_written"], report["n_failed"], report["model"]) == (2, 0, "claude-haiku-4-5")
    assert report["cost_usd"] > 0 and again.reports["qfs_references"]["cost_usd"] == 0
    # 10% of the references (at least one) go to a file for a human to check
    spot = (cache / "financebench_qfs" / "spot_check_claude-haiku-4-5.md").read_text()
    assert spot == ds.reports["qfs_spot_check"]
    assert spot.count("\n## ") == 1 and ("pages 3-4" in spot or "pages 6-7" in spot)
    assert any("written for human review" in n for n in ds.notes)


def test_a_failed_reference_is_reported_and_asked_for_again(make_cfg, tree, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cache = tmp_path / "c"

    def flaky(request: dict, n: int) -> dict:
        if "risk factors" in request["messages"][-1]["content"].split("<question>")[1]:
            return error(400, "invalid_request_error", "prompt is too long")
        return reference_writer(request, n)

    # one endpoint throughout: the response cache answers only for the endpoint it asked
    with FakeAnthropic(flaky) as fake:
        ds = load(make_cfg, tree, cache, *claude(fake.url))
        risk, ops = ds.tasks
        assert risk.reference == "" and "prompt is too long" in risk.meta["reference_missing"]
        assert ops.reference == HIGHLIGHTS
        assert ds.reports["qfs_references"]["n_failed"] == 1
        assert any("could not be written" in n for n in ds.notes)
        fake.handler, before = reference_writer, len(fake.requests)
        ds = load(make_cfg, tree, cache, *claude(fake.url))
        assert len(fake.requests) - before == 1  # only the failed one
    assert [t.reference for t in ds.tasks] == [RISKS, HIGHLIGHTS]


def test_a_dry_run_prices_the_references_without_calling_the_model(make_cfg, tree, tmp_path,
                                                                 monkeypatch, request):
    from runners.dryrun import estimate_requests

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # a dry run needs no key
    cache = tmp_path / "c"
    fake = FakeAnthropic(reference_writer).__enter__()  # the endpoint the cache is keyed on
    request.addfinalizer(lambda: fake.__exit__(None, None, None))
    cfg = make_cfg("dataset=financebench_qfs", f"dataset.root={tree}",
                   f"dataset.options.cache_dir={cache}", *claude(fake.url))
    ds = load_dataset(cfg.dataset, ROOT, call_models=False)
    assert fake.requests == []
    assert all(t.reference == "" and "not written (dry run)" in t.meta["reference_missing"]
               for t in ds.tasks)
    requests = ds.pending.requests(ds)
    assert list(requests) == [t.id for t in ds.tasks]
    est = estimate_requests("financebench_qfs needs", requests, cfg.dataset.reference_model,
                            cache)
    assert (est.n_calls, est.n_cached, est.output_tokens) == (2, 0, 2 * 600)
    assert est.input_tokens > 100
    assert est.cost_usd == pytest.approx((est.input_tokens * 1.0 + 1200 * 5.0) / 1e6)
    # once a reference is in the response cache, the dry run no longer counts it
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    load(make_cfg, tree, cache, *claude(fake.url), "dataset.limit=1")
    est = estimate_requests("x", requests, cfg.dataset.reference_model, cache)
    assert (est.n_calls, est.n_cached) == (1, 1)
    assert "1 calls to claude-haiku-4-5 (1 more already in the response cache)" in est.line()


def test_limit_bad_options_and_missing_key(make_cfg, tree, tmp_path, monkeypatch):
    ds = load(make_cfg, tree, tmp_path / "c", "dataset.limit=1")
    assert [t.id for t in ds.tasks] == ["ZETA_2022_10K:risk_factors"]
    with pytest.raises(DatasetError, match=r"spot_check_fraction=2.*Fix: dataset.options"):
        load(make_cfg, tree, tmp_path / "c", "dataset.options.spot_check_fraction=2")
    with pytest.raises(DatasetError, match=r"unknown dataset.options \['top_n'\].*known"):
        load(make_cfg, tree, tmp_path / "c", "+dataset.options.top_n=3")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(Exception, match="export ANTHROPIC_API_KEY"):
        load(make_cfg, tree, tmp_path / "c", "dataset/reference_model=claude-haiku-4-5")


def test_spot_check_share_is_stable_and_at_least_one():
    ids = [f"DOC_{i}_10K:risk_factors" for i in range(37)]
    chosen = spot_check_ids(ids, 0.1)
    assert len(chosen) == math.ceil(3.7) and chosen == spot_check_ids(list(ids), 0.1)
    assert chosen == [i for i in ids if i in chosen]  # in task order
    assert len(spot_check_ids(ids[:3], 0.1)) == 1


def test_reference_settings_change_the_run_but_not_its_predictions(make_cfg):
    base = make_cfg("dataset=financebench_qfs")
    other = make_cfg("dataset=financebench_qfs", "dataset/reference_model=claude-sonnet-4-6")
    assert config_hash(base) != config_hash(other)
    assert predictions_hash(base) == predictions_hash(other)
    moved = make_cfg("dataset=financebench_qfs", "dataset/reference_model=claude-sonnet-4-6",
                     "dataset.reference_model.base_url=http://127.0.0.1:9")
    assert config_hash(moved) == config_hash(other)


def test_reference_metrics_are_null_with_the_reason_when_there_is_no_reference(tmp_path):
    reason = "silver references need a real model: set dataset/reference_model=..."
    task = Task("t", "summarization", ("D",), "Summarize the risks.", "",
                meta={"reference_missing": reason})
    pred = Prediction(id="t", source="s", system="naive", model="m", task_type="summarization",
                      question=task.question, doc_ids=["D"], ground_truth="",
                      predicted="revenue rose 12% to $840 million.")
    item = ScoringItem(pred, task, None, "Revenue rose 12% to $840 million.", 50, True)
    for scorer in (RougeScorer(), BertScoreScorer(None, 6)):
        (s,) = scorer.score([item])
        assert set(s.values.values()) == {None}
        assert set(s.null_reasons.values()) == {reason}
    (s,) = NumericScorer().score([item])
    assert s.values["numeric_precision"] == 1.0
    assert (s.values["numeric_recall"], s.null_reasons["numeric_recall"]) == (None, reason)
    judge = RuleJudge({pred.predicted: {"faithfulness": "Final score: 5"}})
    (s,) = GEvalScorer(judge, "fake/rule", tmp_path).score([item])
    assert s.values["geval_faithfulness"] == 5
    assert (s.values["geval_coverage"], s.null_reasons["geval_coverage"]) == (None, reason)
    assert not any("Reference summary:" in c for c in judge.calls)  # coverage never asked


@pytest.mark.skipif(not (FB / "pdfs" / "3M_2018_10K.pdf").exists(),
                    reason=f"../shared/datasets not present: {FB} (clone "
                           "github.com/patronus-ai/financebench)")
def test_real_10k_sections(make_cfg, shared_cache):
    """3M's FY2018 10-K: Item 1A on pages 10-12, MD&A from page 15 to Item 7A on page 51."""
    cfg = make_cfg("dataset=financebench_qfs", f"dataset.root={FB}",
                   f"dataset.options.cache_dir={shared_cache}", "dataset.limit=2")
    ds = load_dataset(cfg.dataset, ROOT)
    risk, ops = ds.tasks
    assert (risk.meta["pages"], ops.meta["pages"]) == ([10, 12], [15, 51])
    assert risk.question.startswith("What are the key risk factors 3M describes in its FY2018")
    doc = ds.corpus.documents["3M_2018_10K"]
    risk_text = " ".join(doc.lines[g - 1] for g in risk.gold_lines[doc.doc_id])
    assert "cautionary discussion" in risk_text and "MANAGEMENT" not in risk_text.upper()[:200]
    assert len(ops.gold_lines[doc.doc_id]) > 500


@pytest.mark.slow
def test_qfs_sweep_end_to_end_with_claude_references(tree, tmp_path, monkeypatch):
    with FakeAnthropic(reference_writer) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        with_refs = run_cli(tmp_path, "system=arag,naive", "dataset=financebench_qfs",
                            f"dataset.root={tree}", *claude(fake.url))
        monkeypatch.delenv("ANTHROPIC_API_KEY")
    without = run_cli(tmp_path, "system=naive", "dataset=financebench_qfs",
                      f"dataset.root={tree}", "tracking.experiment=qfs_no_refs")
    no_key = run_cli(tmp_path, "system=naive", "dataset=financebench_qfs",
                     f"dataset.root={tree}", "dataset/reference_model=claude-haiku-4-5",
                     "tracking.experiment=qfs_no_key")
    assert no_key.returncode != 0 and "export ANTHROPIC_API_KEY" in no_key.stderr
    dry = run_cli(tmp_path, "system=naive", "dataset=financebench_qfs", f"dataset.root={tree}",
                  "dataset/reference_model=claude-sonnet-4-6", "runner.dry_run=true",
                  "tracking.experiment=qfs_no_key")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "[dry run] financebench_qfs needs: 2 calls to claude-sonnet-4-6" in dry.stdout
    assert with_refs.returncode == 0, with_refs.stderr[-3000:]
    assert without.returncode == 0, without.stderr[-3000:]
    client = client_for(tmp_path)
    runs = {(r.data.tags.get("system"), r.data.tags.get("dataset"),
             client.get_experiment(r.info.experiment_id).name): r
            for r in all_runs(tmp_path) if r.data.tags.get("system")}
    assert not any(key[2] == "qfs_no_key" for key in runs)  # stopped before any run
    for system in ("arag", "naive"):
        run = runs[(system, "financebench_qfs", "financebench_qfs")]
        assert run.info.status == "FINISHED" and run.data.metrics["n_tasks"] == 2
        assert 0 < run.data.metrics["rouge2_f1_mean"] <= 1
        assert "retrieval_recall_mean" in run.data.metrics
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"qfs_spot_check.md", "sections.json", "qfs_references.json"} <= names
    bare = runs[("naive", "financebench_qfs", "qfs_no_refs")]
    # other references are other data (its digest): a new run, its tasks answered again
    assert bare.data.params["dataset_digest"] != runs[
        ("naive", "financebench_qfs", "financebench_qfs")].data.params["dataset_digest"]
    assert bare.data.metrics["n_resumed"] == 0 and bare.data.metrics["n_answered"] == 2
    assert "rouge2_f1_mean" not in bare.data.metrics
    assert "retrieval_recall_mean" in bare.data.metrics
    records = [json.loads(line) for line in Path(client.download_artifacts(
        bare.info.run_id, "predictions.eval.jsonl", str(tmp_path))).read_text().splitlines()]
    assert all(r["rouge2_f1"] is None and "need a real model" in r["null_reasons"]["rouge2_f1"]
               for r in records)
    # with no reference and no judge, the report compares on what there is
    parent = client.get_run(bare.data.tags["mlflow.parentRunId"])
    report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                            str(tmp_path / "report"))).read_text()
    assert "Comparison metric: `retrieval_precision`" in report


def test_a_section_without_an_end_heading_is_cut_and_says_so():
    assert [s.key for s in SECTIONS] == ["risk_factors", "operational_highlights"]
    pages = ["Item 1A. Risk Factors We face risks. " + "x " * 10] + ["more risk."] * 5
    assert find_section(pages, SECTIONS[0], 3) == (
        (1, 3), "no end heading within 3 pages of page 1; cut at page 3")


def test_report_says_why_a_metric_has_no_scores():
    from report.report import key_finding, primary_metric

    reason = "silver references need a real model"
    records = {"r1": [{"id": "t", "rouge2_f1": None, "retrieval_precision": None,
                       "null_reasons": {"rouge2_f1": reason}}]}
    assert primary_metric(records) == "rouge2_f1"  # nothing scored: the default
    finding = key_finding([{"run": "naive", "run_id": "r1", "status": "FINISHED"}], records,
                          "rouge2_f1")
    assert finding.startswith(f"No run has `rouge2_f1` scores: {reason}. No run has any "
                              "quality score to rank on, so no system is ranked: a judge")
    records["r1"][0]["retrieval_precision"] = 0.5
    assert primary_metric(records) == "retrieval_precision"


def test_headings_as_real_10ks_print_them():
    risk, mdna = SECTIONS
    contents = ("Table of Contents Item 1. Business 3 Item 1A. Risk Factors 5 Item 1B. "
                "Unresolved Staff Comments 9 Item 2. Properties 9 Item 3. Legal 9 Item 7. "
                "Management's Discussion and Analysis 10")
    split_words = [contents, "As described in Part I, Item 1A, risk factors matter.",
                   "PART I Item 1A ITEM 1A. RIS K FACTORS Our results face many risks.",
                   "Item 1B. Unresolved Staff Comments None."]
    assert find_section(split_words, risk, 40) == ((3, 3), "")
    reserved = ["Item 6. [Reserved] Item 7. Management\u2019s Discussion and Analysis Sales grew.",
                "More on sales.", "ITEM 7A. QUANTITATIVE AND QUALITATIVE DISCLOSURES Rates."]
    assert find_section(reserved, mdna, 40) == ((1, 2), "")  # 7A opens page 3
    quoted = ['Read with "Item 7 \u2013 Management\u2019s Discussion and Analysis" below.',
              "ITEM 7. MANAGEMENT\u2019S DISCUSSI ON AND ANALYSIS Sales grew.",
              "Item 8. Financial Statements and Supplementary Data"]
    assert find_section(quoted, mdna, 40) == ((2, 2), "")
