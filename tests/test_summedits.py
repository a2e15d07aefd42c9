"""SummEdits as a meta-evaluation dataset, the no-LLM fact check, and each faithfulness
signal's agreement with people (balanced accuracy, CIs, per-edit recall, meta_items.jsonl).

Tests on the real data skip when ../shared/datasets is absent; the upstream test split is
not there, so a clone with a ``test`` split is built in tmp_path from the evaluation items."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sklearn.metrics import balanced_accuracy_score

from arag.datasets import DatasetError, load_dataset
from metrics.factcheck import statements
from metrics.meta_eval import MetaEvalScorer
from tests import forked
from tests.conftest import ROOT, client_for, run_cli

SHARED = ROOT.parent / "shared" / "datasets" / "summedits"
ECTSUM = SHARED / "data" / "summedits" / "summedits_ectsum.json"
needs_data = pytest.mark.skipif(
    not ECTSUM.exists(),
    reason=f"../shared/datasets not present: {ECTSUM} (clone github.com/salesforce/factualNLG)")


def cfg(root: Path, split: str | None = "evaluation", domain: str = "ectsum", limit=None):
    return SimpleNamespace(name="summedits", adapter="summedits", root=str(root), split=split,
                           limit=limit, options={"domain": domain})


def clone(tmp: Path, items: list[dict], domain: str = "ectsum") -> Path:
    folder = tmp / "factualNLG" / "data" / "summedits"
    folder.mkdir(parents=True)
    (folder / f"summedits_{domain}.json").write_text(json.dumps(items), encoding="utf-8")
    return tmp / "factualNLG"


def upstream_like_test_split(tmp: Path, n: int | None = None) -> Path:
    """An upstream-like clone whose ectsum file has a test split: the evaluation items,
    relabelled, beside two evaluation items."""
    items = json.loads(ECTSUM.read_text(encoding="utf-8"))
    chosen = items[:n] if n else items
    return clone(tmp, [{**i, "split": "test"} for i in chosen] + items[:2])


@needs_data
def test_the_shared_evaluation_split_loads_as_given_answers_with_human_labels():
    data = load_dataset(cfg(SHARED), ROOT)
    assert len(data.tasks) == 117
    labels = [t.meta["human_label"] for t in data.tasks]
    assert (labels.count(1), labels.count(0)) == (46, 71)
    items = {i["id"]: i for i in json.loads(ECTSUM.read_text(encoding="utf-8"))}
    task = data.tasks[1]
    assert task.meta["given_answer"] == items[task.id]["summary"]
    assert task.meta["edit_types"] == items[task.id]["edit_types"]
    assert data.corpus.documents[task.doc_ids[0]].text == items[task.id]["doc"]


@needs_data
def test_the_loader_reads_an_upstream_clones_test_split(tmp_path):
    data = load_dataset(cfg(upstream_like_test_split(tmp_path), split="test"), ROOT)
    assert len(data.tasks) == 117
    assert {t.meta["split"] for t in data.tasks} == {"test"}


def test_a_split_the_file_lacks_is_an_error_naming_the_fix(tmp_path):
    root = clone(tmp_path, [{"id": "a", "doc": "Revenue rose 5%.", "summary": "Revenue rose 5%.",
                             "label": 1, "original_summary": "", "edit_types": [],
                             "split": "evaluation"}])
    with pytest.raises(DatasetError, match=r"no 'test' items.*dataset.split=evaluation.*clone"):
        load_dataset(cfg(root, split="test"), ROOT)
    with pytest.raises(DatasetError, match="dataset.options.domain"):
        load_dataset(cfg(root, domain="news"), ROOT)


def test_a_bad_label_names_the_item_and_field(tmp_path):
    root = clone(tmp_path, [{"id": "a", "doc": "d", "summary": "s", "label": "yes",
                             "original_summary": "", "edit_types": [], "split": "evaluation"}])
    with pytest.raises(DatasetError, match=r"label.*1 \(consistent\) or 0"):
        load_dataset(cfg(root), ROOT)


SOURCE = ("Capital One earned $3.1 billion in the third quarter.\n"
          "Our capital ratio was 13.8 percent, down 70 basis points from the prior quarter.\n"
          "We did not change the buyback, including the dividend.")


@pytest.mark.parametrize(("summary", "kind", "supported"), [
    ("Capital One earned $3,100 million.", "figure", True),
    ("Capital One earned $3.4 billion.", "figure", False),
    ("The lender Discover earned $3.1 billion.", "entity", False),
    ("It earned $3.1 billion in the second quarter.", "entity", False),
    ("The ratio was 13.8 percent, down 70 basis points.", "direction", True),
    ("The ratio was 13.8 percent, up 70 basis points.", "direction", False),
    ("The company did not change the buyback.", "negation", True),
    ("The company did not raise the dividend.", "negation", False),
    ("The company will change the buyback.", "negation", False),
    ("We did not change the buyback, excluding the dividend.", "antonym", False),
])
def test_each_check_finds_what_the_source_supports(summary, kind, supported):
    found = [s for s in statements(summary, SOURCE) if s.kind == kind]
    assert found and all(s.supported for s in found) is supported


@pytest.mark.parametrize("paraphrase", [
    "The lender made $3.1 billion in the third quarter, an increase.",  # no direction there
    "Its capital ratio stood at 13.8 percent, a decline of 70 basis points.",
    "The buyback was left unchanged, the dividend included.",
    "Capital One, a U.S. lender, earned $3.1 billion.",  # "U.S.": the source says nothing
])
def test_a_correct_paraphrase_is_not_flagged(paraphrase):
    assert [s for s in statements(paraphrase, SOURCE) if not s.supported] == []


def meta_records():
    """Four tasks: two consistent, two inconsistent (one an antonym swap); factcheck
    flags one inconsistent task, numeric precision has no value on one task."""
    return [
        {"id": "a", "human_label": 1, "edit_types": [], "human_label_split": "test",
         "factcheck": 1.0, "numeric_precision": None},
        {"id": "b", "human_label": 1, "edit_types": [], "human_label_split": "test",
         "factcheck": 0.5, "numeric_precision": 1.0},
        {"id": "c", "human_label": 0, "edit_types": ["antonym_swap"],
         "human_label_split": "test", "factcheck": 0.5, "numeric_precision": 0.5},
        {"id": "d", "human_label": 0, "edit_types": ["entity_modification"],
         "human_label_split": "test", "factcheck": 1.0, "numeric_precision": 1.0},
    ]


def test_a_documents_index_is_kept_by_characters_so_short_texts_do_not_push_it_out(
        monkeypatch):
    """Documents are indexed once while kept; what is kept is bounded by characters: short
    texts checked between documents leave them in place, and past the bound the least
    recently used document goes first."""
    import metrics.factcheck as factcheck

    built = []
    index = factcheck._index
    monkeypatch.setattr(factcheck, "_index", lambda source: built.append(source) or index(source))
    monkeypatch.setattr(factcheck, "source_index", factcheck._kept(25_000))  # as the module's
    docs = [f"Revenue of document {n} rose 4% to $1.{n} billion. " * 250 for n in range(3)]
    assert all(len(d) > 10_000 for d in docs)
    for doc in docs[:2]:
        for n in range(50):  # the references of its tasks, checked in between
            factcheck.statements(f"Reference {n} says revenue rose.", f"Reference {n}.")
        factcheck.statements("Revenue rose 4%.", doc)
    factcheck.statements("Revenue rose 4%.", docs[0])  # still kept: not built again
    assert [d for d in built if d in docs] == docs[:2]
    factcheck.statements("Revenue rose 4%.", docs[2])  # past the bound: docs[1] goes
    factcheck.statements("Revenue rose 4%.", docs[0])
    factcheck.statements("Revenue rose 4%.", docs[1])
    assert [d for d in built if d in docs] == [docs[0], docs[1], docs[2], docs[1]]
    assert factcheck.source_index.cache.currsize <= 25_000


def test_balanced_accuracy_recall_and_decisions_of_a_hand_computed_example():
    scorer = MetaEvalScorer()
    out = scorer.aggregate([], meta_records())
    # factcheck decides 1,0,0,1: recall on consistent 1/2, on inconsistent 1/2 -> 0.5
    assert out["factcheck_balanced_accuracy"] == pytest.approx(0.5)
    assert out["factcheck_recall_antonym_swap"] == 1.0
    assert out["factcheck_recall_entity_modification"] == 0.0
    # numeric precision: no value decides consistent -> 1,1,0,1: (2/2 + 1/2) / 2
    assert out["numeric_precision_balanced_accuracy"] == pytest.approx(0.75)
    assert out["numeric_precision_no_value"] == 1.0
    assert "factcheck_threshold_best" not in out  # a test split: no threshold is fitted
    items = [json.loads(line) for line in scorer.artifacts()["meta_items.jsonl"].splitlines()]
    assert {(i["id"], i["decision"]) for i in items if i["signal"] == "numeric_precision"} \
        == {("a", 1), ("b", 1), ("c", 0), ("d", 1)}
    assert all(i["decision"] in (0, 1) for i in items)


def test_auc_and_balanced_accuracy_are_on_the_same_items_and_the_valued_auc_says_its_n():
    """Items with no value are decided consistent for balanced accuracy: the AUC ranks them
    as the most consistent too (6.5 of 9 positive-negative pairs in order), and the AUC on
    the valued items alone (1.0 here) is logged apart with its n."""
    from metrics.meta_eval import Judged, signal_metrics
    from report.meta_eval import signal_tables
    from report.writers.words import say

    judged = Judged("numeric_precision", list("abcdef"), [0.2, 0.5, None, 0.9, 1.0, None],
                    [0, 0, 0, 1, 1, 1], 1.0)
    out = signal_metrics(judged, [[]] * 6, None, 0)
    assert out["numeric_precision_n"] == 6
    assert out["numeric_precision_auc_roc"] == pytest.approx(6.5 / 9)
    assert out["numeric_precision_auc_roc_valued"] == 1.0
    assert out["numeric_precision_auc_roc_valued_n"] == 4
    row = {"run": "r", **out, "dataset_domain": "ectsum", "dataset_split": "evaluation"}
    assert "0.722 (1.000 on the 4 items with a value)" in say(signal_tables([row])[0])


def test_a_dataset_without_human_labels_adds_no_meta_metrics():
    records = [{"id": "a", "human_label": None, "factcheck": 1.0}]
    assert MetaEvalScorer().aggregate([], records) == {}


@needs_data
@pytest.mark.slow
def test_a_meta_evaluation_run_on_the_test_split_is_recomputable_and_beats_numeric(tmp_path):
    root = upstream_like_test_split(tmp_path, n=40)
    result = run_cli(tmp_path, "dataset=summedits", f"dataset.root={root}", "dataset.split=test",
                     "metrics=faithfulness", sweep=False)
    assert result.returncode == 0, result.stderr[-3000:]
    client = client_for(tmp_path)
    run = client.search_runs([e.experiment_id for e in client.search_experiments()])[0]
    metrics = run.data.metrics
    for signal in ("factcheck", "numeric_precision"):
        low, high = (metrics[f"{signal}_balanced_accuracy_ci_{k}"] for k in ("low", "high"))
        assert low <= metrics[f"{signal}_balanced_accuracy"] <= high
        assert f"{signal}_recall_antonym_swap" in metrics
    assert metrics["factcheck_balanced_accuracy"] > metrics["numeric_precision_balanced_accuracy"]
    path = client.download_artifacts(run.info.run_id, "meta_items.jsonl", str(tmp_path))
    items = [json.loads(line) for line in Path(path).read_text().splitlines()]
    for signal in ("factcheck", "numeric_precision"):
        mine = [i for i in items if i["signal"] == signal]
        assert len(mine) == 40
        assert balanced_accuracy_score([i["label"] for i in mine], [i["decision"] for i in mine]) \
            == pytest.approx(metrics[f"{signal}_balanced_accuracy"], abs=1e-4)  # as logged
    report = Path(client.download_artifacts(run.info.run_id, "report.md", str(tmp_path)))
    assert "GPT-4" in report.read_text() and "on the published figures' split" in report.read_text()


def test_a_judged_run_quotes_its_judges_measured_agreement_or_says_it_has_none(tmp_path):
    from mlflow import MlflowClient

    from report.meta_eval import judge_caveats, trust, validations
    from report.writers.words import say
    from runners.identity import prompt_versions

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    version = prompt_versions()["judge_prompt_version"]
    judged = [{"judge_calls": 12.0, "judge": "claude-haiku-4-5",
               "judge_model_id": "claude-haiku-4-5", "judge_prompt_version": version}]
    (unvalidated,) = trust(validations(client, judged))
    assert (unvalidated.kind, unvalidated.figures["judge"]) == ("judge_unvalidated", "claude-haiku-4-5")
    assert "python run.py dataset=summedits judge=claude-haiku-4-5" in say(unvalidated)
    exp = client.create_experiment("summedits")
    run = client.create_run(exp)
    for key, value in {"dataset.adapter": "summedits", "judge.model_id": "claude-haiku-4-5",
                       "judge_prompt_version": version, "dataset.split": "test",
                       "dataset.options.domain": "ectsum"}.items():
        client.log_param(run.info.run_id, key, value)
    for key, value in {"geval_faithfulness_balanced_accuracy": 0.81,
                       "geval_faithfulness_balanced_accuracy_ci_low": 0.77,
                       "geval_faithfulness_balanced_accuracy_ci_high": 0.85,
                       "geval_faithfulness_n": 551}.items():
        client.log_metric(run.info.run_id, key, value)
    (validated,) = trust(validations(client, judged))
    assert judge_caveats(validations(client, judged)) == []
    f = validated.figures
    assert (validated.kind, f["balanced_accuracy"], f["ci_low"], f["ci_high"], f["n"], f["floor"]) \
        == ("judge_validated", 0.81, 0.77, 0.85, 551, 0.5)
    assert (f["run_id"], f["domain"], f["split"]) == (run.info.run_id, "ectsum", "test")
    quoted = say(validated)
    assert quoted.startswith("**Judge validated:**")
    assert "81.0%" in quoted and "[95% CI 77.0, 85.0]" in quoted
    assert "its CI above 50.0% (chance)" in quoted
    assert run.info.run_id in quoted and "ectsum domain, test split" in quoted
    other = [{**judged[0], "judge_prompt_version": "older"}]  # other prompts: not measured
    assert [c.kind for c in trust(validations(client, other))] == ["judge_unvalidated"]
    # measured at chance (G-Eval faithfulness at 47.7% [38.3, 56.7]): never "validated";
    # said among the caveats, with the figure and the floor
    for key, value in {"geval_faithfulness_balanced_accuracy": 0.477,
                       "geval_faithfulness_balanced_accuracy_ci_low": 0.383,
                       "geval_faithfulness_balanced_accuracy_ci_high": 0.567}.items():
        client.log_metric(run.info.run_id, key, value)
    assert trust(validations(client, judged)) == []
    (note,) = judge_caveats(validations(client, judged))
    caveat = say(note)
    assert caveat.startswith("Judge measured, not better than chance: `claude-haiku-4-5` (these "
                             "judge prompts) agrees with people at balanced accuracy 47.7% "
                             "[95% CI 38.3, 56.7]")
    assert "does not lie above 50.0% (chance)" in caveat
    from report.model import Note
    from report.writers.markdown import banner

    assert f"- {caveat}" in banner([Note("stated", counts={"text": caveat})])


def fake_judge(request: dict, n: int) -> dict:
    """Faithfulness 5 for a summary saying revenue rose, 2 otherwise; one unreadable reply
    (the summary mentioning "margins"); factual consistency verified only when it rose."""
    from tests.anthropic_fake import text_reply

    prompt = request["messages"][-1]["content"]
    if "Write the evaluation steps" in prompt:
        return text_reply("1. Check each figure.\n2. Score.", request)
    if "Assign the error codes" in prompt:
        return text_reply("Codes: none", request)
    summary = prompt.split("Predicted summary:\n", 1)[1][:200]
    if "numerical claim" in prompt:
        verdict = "verified" if "rose" in summary else "contradicted"
        return text_reply(f"Claim: revenue 5% | Verdict: {verdict}", request)
    if "margins" in summary:
        return text_reply("I would rate this highly.", request)
    return text_reply(f"Final score: {5 if 'rose' in summary else 2}", request)


@pytest.mark.slow
def test_judge_signals_through_the_sdk_get_figures_and_unreadable_replies_are_counted(tmp_path):
    import os
    import sys

    from tests.anthropic_fake import FakeAnthropic
    from tests.conftest import store_overrides

    doc = "Revenue rose 5% to $2 billion.\nMargins held at 30%."
    summaries = [("Revenue rose 5%.", 1), ("Revenue fell 5%.", 0), ("Revenue rose 5% again.", 1),
                 ("Revenue dropped 5%.", 0), ("Revenue rose 5%; margins held.", 1),
                 ("Revenue shrank 5%.", 0)]
    root = clone(tmp_path, [{"id": f"i{k}", "doc": doc, "summary": s, "label": y,
                             "original_summary": "", "edit_types": [] if y else ["antonym_swap"],
                             "split": "test"} for k, (s, y) in enumerate(summaries)])
    with FakeAnthropic(fake_judge) as fake:
        result = forked.run(
            [sys.executable, "run.py", "dataset=summedits", f"dataset.root={root}",
            "dataset.split=test", "metrics=faithfulness", "judge=claude-haiku-4-5",
            f"judge.base_url={fake.url}", "judge.retry_base_delay_s=0.01",
            *store_overrides(tmp_path), f"hydra.run.dir={tmp_path}/out"],
            cwd=ROOT, env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    client = client_for(tmp_path)
    run = client.search_runs([e.experiment_id for e in client.search_experiments()])[0]
    metrics = run.data.metrics
    # faithfulness: 5,2,5,unreadable(-> consistent),2 ... = perfect; counted, not scored
    assert metrics["geval_faithfulness_balanced_accuracy"] == 1.0
    assert metrics["geval_faithfulness_unreadable"] == 1.0
    assert metrics["factual_consistency_balanced_accuracy"] == 1.0
    path = client.download_artifacts(run.info.run_id, "meta_items.jsonl", str(tmp_path))
    items = [json.loads(line) for line in Path(path).read_text().splitlines()]
    unreadable = next(i for i in items if i["signal"] == "geval_faithfulness" and i["id"] == "i4")
    assert unreadable["value"] is None and unreadable["decision"] == 1


def test_a_verdict_deciding_on_factcheck_quotes_its_held_out_accuracy_and_split():
    from report.report import build_report
    from tests.test_report import rec, row

    records = {name: [rec(f"t{k}", 3, factcheck=1.0 - 0.1 * (k % 3) - shift) for k in range(6)]
               for name, shift in (("arag", 0.0), ("naive", 0.1))}
    text, data = build_report([row("arag"), row("naive")], records, "t", ["factcheck"])
    from report.writers.words import say

    [quoted] = [n for n in data["analysis"].notes if n.kind == "factcheck_accuracy"]
    assert quoted.counts["sales_call test"][0] == 0.688
    assert "0.688 [0.643, 0.734] on SummEdits' sales_call test split" in say(quoted)
    _, other = build_report([row("arag"), row("naive")], records, "t", ["geval_coverage"])
    assert not [n for n in other["analysis"].notes if n.kind == "factcheck_accuracy"]


def test_a_meta_evaluation_reports_its_own_finding_not_a_system_verdict():
    """Its answer and key finding are each signal's balanced accuracy with its CI beside the
    published figures and the split; no "Nothing decided", and none of the caveats on
    comparing systems (offline model, context budget, missing references)."""
    from report import console
    from report.report import build_report, result_of
    from tests.test_report import rec, row

    meta = row("summedits", model_provider="offline", judge_provider="none", judge_calls=0.0,
               dataset_split="evaluation", dataset_domain="ectsum",
               docs_within_context_budget_share=1.0, context_budget_chunks=8.0,
               n_tasks_without_reference=117.0,
               factcheck_balanced_accuracy=0.712, factcheck_balanced_accuracy_ci_low=0.655,
               factcheck_balanced_accuracy_ci_high=0.768, factcheck_n=117.0,
               numeric_precision_balanced_accuracy=0.551,
               numeric_precision_balanced_accuracy_ci_low=0.5,
               numeric_precision_balanced_accuracy_ci_high=0.6, numeric_precision_n=117.0)
    records = {"summedits": [rec(f"i{k}", None, factcheck=1.0) for k in range(6)]}
    text, data = build_report([meta], records, "t")
    assert data["answer"].startswith("Meta-evaluation, not a comparison of systems: the best "
                                     "faithfulness signal against people's labels is "
                                     "`factcheck` 71.2% [95% CI 65.5, 76.8] (n=117)")
    assert "SummEdits ectsum domain, evaluation split" in data["answer"]
    assert "Nothing decided" not in text and "contender" not in text
    for caveat in ("offline", "context budget", "no reference summary"):
        assert caveat not in text
    key = text.split("## Key finding\n", 1)[1]
    assert "`numeric_precision` 55.1% [95% CI 50.0, 60.0]" in key
    assert "GPT-4 87.0%" in key and "not the same split as the published figures" in key
    result = result_of([meta], records, "t")
    terminal = " ".join(x.strip() for x in console.verdict(
        result, "sqlite:///mlruns/mlflow.db").splitlines())
    assert "factcheck 71.2% [95% CI 65.5, 76.8]" in terminal
    assert "numeric_precision 55.1%" in terminal and "Nothing decided" not in terminal
