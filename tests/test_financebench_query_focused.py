"""FinanceBench questions as query-focused summaries: one topic per question over its
filing, the evidence pages as gold, silver references written once with a spot check."""

from __future__ import annotations

from arag.datasets import load_dataset
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT
from tests.test_financebench import write_tree
from tests.test_financebench_qfs import claude

SILVER = "ACME spent $150 million of capital expenditure in FY2022."


def load(make_cfg, tmp_path, *overrides: str):
    root = tmp_path / "fb"
    if not root.exists():
        write_tree(root)
    cfg = make_cfg("dataset=financebench_query_focused", f"dataset.root={root}",
                   f"dataset.options.cache_dir={tmp_path / 'c'}", *overrides)
    return cfg, load_dataset(cfg.dataset, ROOT)


def test_each_question_is_a_topic_over_its_filing_with_evidence_pages_as_gold(make_cfg,
                                                                               tmp_path):
    cfg, ds = load(make_cfg, tmp_path)
    assert cfg.summarization_style.value == "query_focused"
    assert [t.id for t in ds.tasks] == ["fb_1:topic", "fb_3:topic", "fb_4:topic"]
    task = ds.tasks[0]
    assert task.task_type == "summarization" and task.doc_ids == ("ACME_2022_10K",)
    assert task.question == ("Summarize what ACME's FY2022 10-K says about the following: "
                             "Question fb_1?")
    assert task.gold_lines == {"ACME_2022_10K": (3, 4, 5)}  # every line of evidence page 2
    assert ds.corpus.documents["ACME_2022_10K"].line_pages[2] == 2
    assert task.meta["short_answer"] == "$150 million" and task.meta["evidence_pages"] == [2]
    assert task.reference == "" and "reference_model" in task.meta["reference_missing"]


def test_silver_references_are_written_once_from_the_evidence_and_spot_checked(
        make_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic(lambda request, n: text_reply(SILVER, request)) as fake:
        _, ds = load(make_cfg, tmp_path, *claude(fake.url), "dataset.limit=1")
        _, again = load(make_cfg, tmp_path, *claude(fake.url), "dataset.limit=1")
        prompts = [r["json"]["messages"][0]["content"] for r in fake.requests]
    assert [t.reference for t in ds.tasks] == [SILVER] == [t.reference for t in again.tasks]
    assert len(prompts) == 1  # the second load is served by the response cache
    assert "Capital expenditure was $150 million." in prompts[0]  # the evidence page
    assert "<style>query_focused</style>" in prompts[0]
    spot = (tmp_path / "c" / "financebench_query_focused").glob("spot_check_*.md")
    text = next(spot).read_text()
    assert "fb_1:topic" in text and "`ACME_2022_10K.pdf`, pages 2-2" in text and SILVER in text
