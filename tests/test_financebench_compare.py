"""dataset=financebench_compare: one year-over-year task per company, gold on two filings.

A tiny upstream-shaped tree with hand-written 10-K PDFs: a company with two filings, one
whose closest pair lacks an MD&A (the next pair is taken), one whose MD&As are never found
(no task, reported) and one with a single 10-K. References through the real SDK against
the fake Messages API cover both filings. The sweep runs the CLI end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.datasets import DatasetError, load_dataset
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, run_cli
from tests.test_financebench import write_upstream_tree

KEY = "sk-ant-test-compare"


def ten_k(company: str, year: int, revenue: int, with_mdna: bool = True) -> list[list[str]]:
    """A 10-K: cover, Item 1A on page 2, MD&A on pages 3-4 (Item 7A ends it on page 4)."""
    mdna = [["Item 7. Management's Discussion and Analysis",
             f"Revenue was ${revenue} million in fiscal {year}.",
             f"Operating margin was {10 + year % 10}.5% in fiscal {year}."],
            [f"Free cash flow was ${revenue // 10} million.",
             "Item 7A. Quantitative and Qualitative Disclosures About Market Risk",
             "We hedge currency exposure."]]
    plain = [["Our stores did well this year."], ["We opened new stores."]]
    return [[f"{company} Annual Report on Form 10-K for fiscal {year}."],
            ["Item 1A. Risk Factors", "Demand may fall.", "Item 1B. Unresolved Staff Comments"],
            *(mdna if with_mdna else plain),
            ["Item 8. Financial Statements and Supplementary Data", "Net income rose."]]


FILINGS = {  # doc_name: (company, year, revenue, has an MD&A)
    "ZETA_2021_10K": ("Zeta", 2021, 700, True), "ZETA_2022_10K": ("Zeta", 2022, 840, True),
    "KAPPA_2017_10K": ("Kappa", 2017, 300, True), "KAPPA_2020_10K": ("Kappa", 2020, 320, False),
    "KAPPA_2021_10K": ("Kappa", 2021, 350, True),
    "LAMBDA_2019_10K": ("Lambda", 2019, 90, False), "LAMBDA_2020_10K": ("Lambda", 2020, 95, False),
    "OMEGA_2021_10K": ("Omega", 2021, 50, True),
}


def write_tree(root: Path) -> Path:
    docs = [(n, c, "10k", y) for n, (c, y, _, _) in FILINGS.items()]
    docs.append(("ZETA_2023Q1_10Q", "Zeta", "10q", 2023))
    pdfs = {n: ten_k(c.upper(), y, r, m) for n, (c, y, r, m) in FILINGS.items()}
    pdfs["ZETA_2023Q1_10Q"] = [["Quarterly report."]]
    return write_upstream_tree(root, docs, [], pdfs)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return write_tree(tmp_path_factory.mktemp("fbc") / "fb")


def load(make_cfg, tree: Path, cache: Path, *overrides: str):
    cfg = make_cfg("dataset=financebench_compare", f"dataset.root={tree}",
                   f"dataset.options.cache_dir={cache}", *overrides)
    return load_dataset(cfg.dataset, ROOT)


def test_one_task_per_company_with_both_mdnas_as_gold(make_cfg, tree, shared_cache):
    ds = load(make_cfg, tree, shared_cache)
    assert [t.id for t in ds.tasks] == ["KAPPA_2017_10K~KAPPA_2021_10K:comparison",
                                        "ZETA_2021_10K~ZETA_2022_10K:comparison"]
    kappa, zeta = ds.tasks
    assert zeta.question == "How did Zeta's revenue, margins and cash flow change from FY2021 " \
                            "to FY2022?"
    assert zeta.doc_ids == ("ZETA_2021_10K", "ZETA_2022_10K") and zeta.task_type == "summarization"
    assert zeta.meta["pages_by_doc"] == {"ZETA_2021_10K": [3, 4], "ZETA_2022_10K": [3, 4]}
    for task in ds.tasks:  # every line of both MD&As, nothing else
        assert set(task.gold_lines) == set(task.doc_ids)
        for doc_id, gold in task.gold_lines.items():
            doc = ds.corpus.documents[doc_id]
            assert gold == tuple(i for i, p in enumerate(doc.line_pages, 1) if p in (3, 4))
            text = " ".join(doc.lines[g - 1] for g in gold)
            assert "Free cash flow" in text and "Net income" not in text
    # Kappa's closest pairs need its 2020 10-K, which has no MD&A: 2017 vs 2021 is taken
    report = ds.reports["comparisons"]
    assert report["companies"]["Kappa"]["pair"] == ["KAPPA_2017_10K", "KAPPA_2021_10K"]
    assert [p["pair"] for p in report["companies"]["Kappa"]["passed_over"]] == [
        ["KAPPA_2020_10K", "KAPPA_2021_10K"], ["KAPPA_2017_10K", "KAPPA_2020_10K"]]
    assert "KAPPA_2020_10K: no 'Item 7." in report["companies"]["Kappa"]["passed_over"][0]["why"]
    # Lambda never has an MD&A: no task, reported; Omega has one 10-K: not comparable
    assert report["companies_without_task"] == ["Lambda"]
    assert (report["n_companies_with_two_years"], report["n_tasks"]) == (3, 2)
    assert any("got no task" in n for n in ds.notes)
    assert sorted(ds.corpus.documents) == ["KAPPA_2017_10K", "KAPPA_2021_10K", "ZETA_2021_10K",
                                           "ZETA_2022_10K"]


def test_without_a_reference_model_references_are_null_with_the_reason(make_cfg, tree,
                                                                       shared_cache):
    ds = load(make_cfg, tree, shared_cache)
    assert all(t.reference == "" and "need a real model" in t.meta["reference_missing"]
               for t in ds.tasks)
    assert ds.reports["compare_references"]["model"] is None


def test_limit_parses_only_the_filings_it_needs(make_cfg, tree, tmp_path):
    ds = load(make_cfg, tree, tmp_path / "c", "dataset.limit=1")
    assert [t.id for t in ds.tasks] == ["KAPPA_2017_10K~KAPPA_2021_10K:comparison"]
    # Kappa's three filings (its first pair failed), not Lambda's, Zeta's or Omega's
    assert ds.reports["pdf_parsing"]["n_pdfs"] == 3


def test_no_comparable_company_is_a_clear_error(make_cfg, tmp_path):
    single = write_upstream_tree(tmp_path / "one", [("OMEGA_2021_10K", "Omega", "10k", 2021)],
                                 [], {"OMEGA_2021_10K": ten_k("OMEGA", 2021, 50)})
    with pytest.raises(DatasetError, match="two fiscal years"):
        load(make_cfg, single, tmp_path / "c")


def test_references_are_written_from_both_mdnas_in_the_comparison_style(make_cfg, tree, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cache = tmp_path / "c"
    comparison = "revenue rose from $700 million in fy2021 to $840 million in fy2022."
    with FakeAnthropic(lambda request, n: text_reply(comparison, request)) as fake:
        ds = load(make_cfg, tree, cache, "dataset/reference_model=claude-haiku-4-5",
                  f"dataset.reference_model.base_url={fake.url}",
                  "dataset.reference_model.max_retries=0")
        prompts = [r["json"]["messages"][0]["content"] for r in fake.requests]
    assert [t.reference for t in ds.tasks] == [comparison, comparison]
    zeta = next(p for p in prompts if "Zeta's revenue" in p)
    assert "Revenue was $700 million in fiscal 2021." in zeta
    assert "Revenue was $840 million in fiscal 2022." in zeta
    assert "<style>comparison</style>" in zeta and "Net income rose" not in zeta
    assert ds.reports["compare_references"]["n_written"] == 2
    spot = (cache / "financebench_compare" / "spot_check_claude-haiku-4-5.md").read_text()
    assert spot == ds.reports["compare_spot_check"]
    assert spot.count("- filing: ") == 2  # both filings of the one task checked, with pages


@pytest.mark.slow
def test_compare_sweep_three_systems_with_two_filing_gold(tree, tmp_path, shared_cache):
    """The issue's command on the tiny tree: three FINISHED children, references null with
    the reason, retrieval scored against both filings' MD&A pages."""
    done = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset=financebench_compare",
                   f"dataset.root={tree}", cache=shared_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {r.data.tags["system"]: r for r in all_runs(tmp_path) if r.data.tags.get("system")}
    assert sorted(runs) == ["arag", "naive", "stuffing"]
    for run in runs.values():
        assert run.info.status == "FINISHED"
        assert run.data.metrics["n_tasks"] == 2 and run.data.metrics["n_errors"] == 0
        assert "rouge2_f1_mean" not in run.data.metrics
    for system in ("arag", "naive"):
        assert 0 < runs[system].data.metrics["retrieval_recall_mean"] <= 1
    naive = runs["naive"].data.metrics
    assert 0 < naive["recall_at_10_mean"] <= 1 and naive["hit_near_page_at_5_mean"] == 1.0
    client = client_for(tmp_path)
    records = [json.loads(line) for line in Path(client.download_artifacts(
        runs["naive"].info.run_id, "predictions.eval.jsonl", str(tmp_path / "e"))).read_text()
        .splitlines()]
    assert all("need a real model" in r["null_reasons"]["rouge2_f1"] for r in records)
    # the gold spans are pages of both filings: top-10 covers each filing's MD&A pages
    zeta = next(r for r in records if r["id"].startswith("ZETA"))
    assert zeta["recall_at_10"] == 1.0 and zeta["n_gold_chunks"] >= 4
    names = {a.path for a in client.list_artifacts(runs["naive"].info.run_id)}
    assert {"comparisons.json", "compare_references.json"} <= names
