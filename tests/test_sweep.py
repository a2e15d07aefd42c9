"""The product's promise, end to end: `run.py -m` -> one parent run, FINISHED child runs.

Runs the real entry point in a subprocess (real Hydra launcher, real sqlite MLflow store,
real FAISS and BERTScore), pointed at temporary stores.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from arag.citations import strip_citations
from tests.conftest import ROOT, all_runs, client_for, run_cli, write_mini_dataset

pytestmark = pytest.mark.slow


def test_sweep_logs_parent_and_three_finished_children(sample_sweep):
    tmp, first, *_ = sample_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    client = client_for(tmp)
    exp = client.get_experiment_by_name("sample")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    parents = [r for r in runs if r.data.tags.get("role") == "sweep_parent"]
    # the finished sweep's re-run opened no parent: the first sweep's and the changed one's
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(c.data.tags["system"] for c in children) == ["arag", "naive", "stuffing"]
    n_tasks = len((ROOT / "data/sample/tasks.jsonl").read_text().splitlines())
    for child in children:
        m, tags = child.data.metrics, child.data.tags
        assert child.info.status == "FINISHED"
        for key in ("rouge2_f1_mean", "bertscore_f1_mean", "latency_ms_p50", "cost_usd_total"):
            assert key in m, (tags["system"], key)
        assert m["n_tasks"] == n_tasks and m["n_errors"] == 0
        assert m["cost_usd_total"] == 0.0  # the offline model is free
        assert 0 < m["rouge2_f1_mean"] < 1 and 0 < m["bertscore_f1_mean"] <= 1
        for tag in ("dataset", "model", "sweep_id", "config_hash", "git_commit"):
            assert tags[tag], tag
        assert child.data.params["max_loops"] == "22"
        files = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config.yaml", "predictions.jsonl", "predictions.eval.jsonl",
                "eval_table.json"} <= files
        retrieves = tags["system"] in ("arag", "naive")
        assert ("retrieval_recall_mean" in m) == retrieves
    parent_files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report.md", "report.html", "plots"} <= parent_files
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/comparison.png" in plots
    report = Path(client.download_artifacts(parent.info.run_id, "report.md", str(tmp / "r")))
    text = report.read_text()
    # recall against loops is drawn only when the agent's loops vary; else a sentence says why
    assert ("plots/recall_vs_loops.png" in plots) != ("would be one vertical line" in text)
    for section in ("## Key finding", "## Quality", "## Cost and latency", "## Error taxonomy",
                    "## Paired comparisons", "## Examples chosen from the numbers"):
        assert section in text
    assert "no judge" in text.lower() and "Wilcoxon" in text


def test_logged_rouge_equals_a_recomputation_from_logged_predictions(sample_sweep):
    from rouge_score import rouge_scorer

    tmp, *_ = sample_sweep
    client = client_for(tmp)
    child = next(r for r in all_runs(tmp) if r.data.tags.get("system") == "naive")
    path = client.download_artifacts(child.info.run_id, "predictions.jsonl", str(tmp / "dl"))
    preds = [json.loads(line) for line in Path(path).read_text().splitlines()]
    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    # ROUGE reads each answer without its citation markers
    scores = [scorer.score(p["ground_truth"], strip_citations(p["predicted"]))["rouge2"].fmeasure
              for p in preds]
    assert child.data.metrics["rouge2_f1_mean"] == pytest.approx(  # 4 significant digits
        sum(scores) / len(scores), rel=1e-3)


def test_index_is_built_once_and_a_finished_sweep_is_not_run_again(sample_sweep):
    tmp, first, second, changed = sample_sweep
    assert second.returncode == 0 and changed.returncode == 0, changed.stderr[-3000:]
    embeds = re.compile(r"embedding \d+ sentences")
    assert len(embeds.findall(first.stderr)) == 1 and "stored in" in first.stderr
    assert first.stderr.count("loaded from cache") == 1  # naive reuses the index arag built
    # the same sweep again: every run already FINISHED, nothing embedded or predicted
    assert second.stderr.count("nothing to do") == 4  # each job, and the sweep's parent
    assert "every job of this sweep already FINISHED" in second.stderr
    # every parent in the store has children: the re-run opened no empty parent
    runs = all_runs(tmp)
    parents = {r.info.run_id for r in runs if r.data.tags.get("role") == "sweep_parent"}
    assert len(parents) == 2  # the first sweep's and the changed one's
    assert parents == {r.data.tags.get("mlflow.parentRunId") for r in runs} - {None}
    # and the re-run says where the verdict of those runs already is
    earlier = re.search(r"Nothing new to compare: the verdict of these runs is on sweep run "
                        r"(\w+)", second.stdout)
    assert earlier and earlier.group(1) in parents, second.stdout[-2000:]
    # with its verdict again, as the sweep printed it
    answer = next(line for line in first.stdout.splitlines()
                  if line.startswith(("Decided", "Nothing decided")))
    assert answer in second.stdout.split("Nothing new to compare", 1)[1]
    assert f"/{earlier.group(1)}/artifacts/report.html" in second.stdout
    assert f"runs/{earlier.group(1)}/artifacts" in second.stdout  # the MLflow UI address
    assert not embeds.search(second.stderr) and "task traces logged" not in second.stderr
    # a new configuration over the same corpus loads the index instead of embedding
    assert not embeds.search(changed.stderr)
    assert changed.stderr.count("loaded from cache") == 2
    reused_parent = [r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"
                     and "max_loops" not in r.data.tags["sweep_overrides"]]
    files = {a.path for p in reused_parent for a in client_for(tmp).list_artifacts(p.info.run_id)}
    assert "report.md" in files


def _no_finished_runs(tmp: Path) -> bool:
    return not [r for r in all_runs(tmp) if r.info.status == "FINISHED"
                and r.data.tags.get("role") != "sweep_parent"]


def test_unknown_system_fails_before_any_run(tmp_path):
    result = run_cli(tmp_path, "system=agentic")
    assert result.returncode != 0
    assert "agentic" in result.stderr and "arag" in result.stderr and "stuffing" in result.stderr
    assert _no_finished_runs(tmp_path)


def test_negative_max_loops_names_the_key_and_fix(tmp_path):
    result = run_cli(tmp_path, "max_loops=-1", sweep=False)
    assert result.returncode != 0
    assert "max_loops=-1" in result.stderr and "Fix: max_loops=" in result.stderr
    assert _no_finished_runs(tmp_path)


def test_malformed_task_line_fails_the_sweep_and_no_run_finishes(tmp_path):
    root = write_mini_dataset(tmp_path / "bad")
    with open(root / "tasks.jsonl", "a") as f:
        f.write('{"id": "broken", \n')
    result = run_cli(tmp_path, "system=arag,naive", f"dataset.root={root}")
    assert result.returncode != 0
    assert "tasks.jsonl:3" in result.stderr and "malformed JSON" in result.stderr
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []  # no parent


def test_task_pointing_at_missing_document(tmp_path):
    root = write_mini_dataset(tmp_path / "missing")
    rows = [json.loads(line) for line in (root / "tasks.jsonl").read_text().splitlines()]
    rows[1]["doc_ids"] = ["GHOST_q1_2020"]
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli(tmp_path, f"dataset.root={root}", sweep=False)
    assert result.returncode != 0
    assert "tasks.jsonl:2" in result.stderr and "GHOST_q1_2020" in result.stderr
    assert _no_finished_runs(tmp_path)


def test_each_child_run_has_one_trace_per_task_with_llm_and_tool_spans(sample_sweep):
    import mlflow

    tmp, *_ = sample_sweep
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    runs = [r for r in all_runs(tmp) if r.data.tags.get("system")]
    for run in runs[:3]:
        traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                      return_type="list")
        assert len(traces) == run.data.metrics["n_tasks"]
        kinds = {s.span_type for s in traces[0].data.spans}
        assert "CHAT_MODEL" in kinds
        if run.data.tags["system"] == "arag":
            assert "TOOL" in kinds and "AGENT" in kinds
            tool = next(s for s in traces[0].data.spans if s.span_type == "TOOL")
            assert tool.inputs and "chunk_ids" in tool.outputs
        if run.data.tags["system"] == "naive":
            assert "RETRIEVER" in kinds


def test_dry_run_prices_systems_and_judge_without_a_key_a_model_call_or_a_run(tmp_path,
                                                                            monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = run_cli(tmp_path, "system=arag,naive", "model=claude-haiku-4-5",
                     "judge=claude-haiku-4-5", "runner.dry_run=true", "dataset.limit=2")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout.splitlines()
    systems = [line for line in out if " tasks, " in line]
    assert len(systems) == 2 and all(line.startswith("[dry run]") for line in systems)
    assert all("2 tasks" in line and "estimated cost $" in line for line in systems)
    # 2 tasks x (faithfulness, coverage, at most one taxonomy call, one claim check)
    # + 2 criteria to write
    judges = [line for line in out if " judge: " in line]
    assert len(judges) == 2 and all("10 calls to claude-haiku-4-5" in line for line in judges)
    cost = re.compile(r"estimated cost \$([0-9.]+)")
    total = out[-1]
    assert total.startswith("[dry run] sweep total: 2 jobs") and "judge $" in total
    parts = sum(float(cost.search(line).group(1)) for line in systems + judges)
    assert float(cost.search(total).group(1)) == pytest.approx(parts, abs=2e-4)
    assert float(cost.search(judges[0]).group(1)) > 0
    assert not (tmp_path / "mlflow.db").exists() or not all_runs(tmp_path)


def test_loop_budget_sweep_draws_the_curve_and_a_single_run_gets_its_report(tmp_path,
                                                                               shared_cache):
    result = run_cli(tmp_path, "system=arag", "max_loops=2,4,8", "dataset.limit=3",
                     cache=shared_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    client = client_for(tmp_path)
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/loop_budget_curve.png" in plots
    report = Path(client.download_artifacts(parent.info.run_id, "report.md", str(tmp_path)))
    assert "| max_loops |" in report.read_text()
    names = sorted(r.info.run_name for r in all_runs(tmp_path) if r.data.tags.get("system"))
    # the console's last lines: the verdict over the three budgets and where the report is
    tail = result.stdout.strip().splitlines()[-20:]
    labels = [r.data.tags["run_label"] for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert all(any(n in line for line in tail) for n in labels)
    assert any("report.html" in line for line in tail)
    # named by the swept key and the data: dataset, split and limit
    assert names == ["arag max_loops=2 sample[:3]", "arag max_loops=4 sample[:3]",
                     "arag max_loops=8 sample[:3]"]
    single = run_cli(tmp_path, "system=naive", "dataset.limit=2", sweep=False,
                     cache=shared_cache)
    assert single.returncode == 0, single.stderr[-3000:]
    run = next(r for r in all_runs(tmp_path) if r.data.tags.get("system") == "naive")
    assert run.info.run_name == "naive sample[:2]"  # named from its overrides and data
    assert "mlflow.parentRunId" not in run.data.tags
    assert "report.md" in {a.path for a in client.list_artifacts(run.info.run_id)}


def test_a_skipped_task_still_has_a_trace_that_says_why(tmp_path, shared_cache):
    import mlflow

    result = run_cli(tmp_path, "system=stuffing", "model.context_limit=1500", "dataset.limit=2",
                     cache=shared_cache, sweep=False)
    assert result.returncode != 0, result.stderr[-3000:]  # nothing answered: not FINISHED
    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert run.info.status == "FAILED" and run.data.metrics["n_skipped"] == 2
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                  return_type="list")
    assert len(traces) == 2
    for trace in traces:
        (root,) = trace.data.spans
        assert root.outputs["skipped"] is True
        assert "exceeds the model's context" in root.outputs["skip_reason"]
