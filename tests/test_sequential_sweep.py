"""A sequential sweep: its keys are refused with the fix, its rounds answer a growing
prefix of one seeded order, and a round asking more tasks continues a finished run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from metrics.sequential import run_order
from runners.job import this_round
from runners.resume import _round_grows
from runners.validation import ConfigError, validate_config
from tests.conftest import compose_cfg


@pytest.mark.parametrize(("overrides", "says"), [
    (["runner.sequential=true"], "report.decide_on=[rouge2_f1]"),
    (["runner.sequential=true", "report.decide_on=[length_ratio]"], "declares no range"),
    (["runner.batch_size=0"], "runner.batch_size"),
    (["+report.equivalence_margin.rouge2_f1=0"], "finite positive"),
    (["+report.equivalence_margin.rouge2_f1=-0.1"], "finite positive"),
    (["+report.equivalence_margin.rouge2_f1=nan"], "finite positive"),
    (["+report.equivalence_margin.no_such_metric=0.1"], "names no metric"),
])
def test_bad_sequential_settings_are_refused_with_the_fix(overrides, says):
    with pytest.raises(ConfigError, match="Fix") as err:
        validate_config(compose_cfg(overrides))
    assert says in str(err.value)


def test_a_sequential_sweep_deciding_on_a_bounded_metric_is_accepted():
    validate_config(compose_cfg(["runner.sequential=true", "report.decide_on=[rouge2_f1]",
                                 "+report.equivalence_margin.rouge2_f1=0.01"]))


def test_the_order_of_any_subset_is_its_order_in_the_whole_set():
    ids = [f"t{i}" for i in range(50)]
    whole = run_order(ids, seed=3)
    part = run_order(ids[10:30], seed=3)
    assert part == [t for t in whole if t in set(part)]
    assert run_order(ids, seed=4) != whole and sorted(whole) == sorted(ids)


def test_each_round_answers_a_prefix_of_the_order_that_grows():
    tasks = [SimpleNamespace(id=f"t{i}") for i in range(30)]
    runner = SimpleNamespace(sequential=True, order_seed=1, round_tasks=10)
    first = {t.id for t in this_round(tasks, runner)}
    runner.round_tasks = 20
    second = {t.id for t in this_round(tasks, runner)}
    assert len(first) == 10 and len(second) == 20 and first < second
    assert first == set(run_order((t.id for t in tasks), 1)[:10])
    runner.sequential = False
    assert len(this_round(tasks, runner)) == 30


def test_a_finished_run_with_fewer_tasks_than_the_round_goes_on():
    def run(asked):
        return SimpleNamespace(data=SimpleNamespace(metrics={} if asked is None else
                                                    {"n_tasks_asked": asked}))
    job = SimpleNamespace(dataset=SimpleNamespace(tasks=[1] * 40))
    assert _round_grows(run(20.0), job)
    assert not _round_grows(run(40.0), job)
    assert not _round_grows(run(None), job)  # logged before rounds: every task


def coin_records(n: int, seed: int, planted: bool) -> dict[str, list[dict]]:
    """Two systems' rouge1_f1 per task: planted, the first always 1 and the second 0; null,
    a fair coin per task says which gets 1."""
    import random

    rng = random.Random(seed)
    first, second = [], []
    for i in range(n):
        win = True if planted else rng.random() < 0.5
        first.append({"id": f"t{i:03d}", "rouge1_f1": 1.0 if win else 0.0})
        second.append({"id": f"t{i:03d}", "rouge1_f1": 0.0 if win else 1.0})
    return {"ref": first, "fill": second}


@pytest.mark.parametrize("seed", range(5))
def test_a_planted_null_is_never_decided_at_any_look(seed):
    from metrics.sequential import State, Stop, stop_reason
    from report.analyses.sequential import looks_at

    records = coin_records(200, seed, planted=False)
    for n in range(20, 201, 20):
        looks = looks_at(records, ["rouge1_f1"], seed, n)
        assert looks[0].state != State.decided, n
        assert stop_reason(looks, n, 200) in (None, Stop.tasks_out)


def report_inputs(records: dict[str, list[dict]], done: int, total: int, cost: float | None):
    from report.analyses import Inputs

    rows = [{"run": label, "run_id": label, "status": "FINISHED", "n_tasks_asked": done,
             "n_tasks_of_data": total, "cost_usd_total": cost,
             "sequential": {"order_seed": 0, "max_tasks": None}} for label in records]
    return Inputs(rows, rows, records, None, ["rouge1_f1"], [], {})  # type: ignore[arg-type]


def test_a_sweep_that_stopped_early_decides_by_its_intervals_and_says_when():
    from report.analyses.sequential import sequential_verdict
    from report.model import Authority
    from report.writers.words import say

    records = coin_records(20, 0, planted=True)
    found = sequential_verdict(report_inputs(records, 20, 120, 0.5))
    stopped, look = found.claims
    assert stopped.kind == "stopped" and stopped.key
    assert (stopped.figures["tasks"], stopped.figures["tasks_total"]) == (20, 120)
    assert stopped.figures["spend_usd"] == 1.0 and stopped.figures["estimated_full_usd"] == 6.0
    assert stopped.figures["stop"] == "decided" and stopped.figures["early"]
    assert look.authority == Authority.sequential and look.decisive
    assert look.figures["better"] == "ref" and look.ci[0] > 0
    [note] = found.notes
    assert note.kind == "descriptive_tests" and note.counts["early"]
    assert found.metrics == {"sequential_tasks": 20.0, "sequential_decided": 1.0}
    # the words, said once here (the writers' snapshots hold the rest)
    assert say(stopped).startswith("Decided after 20 of 120 tasks ($1.00 of an estimated $6.00)")
    assert "**ref** is better on `rouge1_f1`" in say(look)
    assert say(note).startswith("The sweep stopped when its anytime-valid intervals allowed")


def test_a_null_that_ran_out_of_tasks_declares_nothing():
    from report.analyses.sequential import sequential_verdict
    from report.writers.words import say

    found = sequential_verdict(report_inputs(coin_records(60, 1, planted=False), 60, 60, None))
    stopped, look = found.claims
    assert stopped.figures["stop"] == "tasks_out" and not stopped.figures["early"]
    assert not look.decisive and look.figures["state"] == "open" and look.ci[0] < 0 < look.ci[1]
    assert say(stopped).startswith("Ran out of tasks after 60 of 60 tasks: undecided")
    [note] = found.notes  # it never stopped early, and does not say it did
    assert not note.counts["early"] and note.counts["stop"] == "tasks_out"
    assert say(note).startswith("The sweep looked at its anytime-valid intervals after every "
                                "round and stopped for another reason (tasks out)")


def test_a_sweep_that_was_not_sequential_gets_no_sequential_finding():
    from report.analyses.sequential import sequential_verdict

    inputs = report_inputs(coin_records(20, 0, planted=True), 20, 20, None)
    for row in inputs.rows:
        row["sequential"] = None
    found = sequential_verdict(inputs)
    assert found.claims == [] and found.notes == []


def planted_folder(root: Path, n: int) -> tuple[Path, Path, Path]:
    """A folder of ``n`` short calls with references, and two pipelines' predictions: one
    copies each reference, the other answers filler."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    tasks = []
    for i in range(n):
        reference = f"quarter {i} revenue rose {i + 3} percent on demand for segment {i % 7}."
        (docs / f"call_{i:02d}.txt").write_text(f"Company {i} reported.\n{reference}\nQ&A.\n")
        tasks.append({"id": f"t{i:02d}", "doc_ids": [f"call_{i:02d}"],
                      "question": "Summarize the call.", "reference": reference})
    (docs / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ref, fill = root / "ref.jsonl", root / "fill.jsonl"
    ref.write_text("".join(json.dumps({"id": t["id"], "predicted": t["reference"]}) + "\n"
                           for t in tasks))
    fill.write_text("".join(json.dumps({"id": t["id"], "predicted": "lorem ipsum dolor"}) + "\n"
                            for t in tasks))
    return docs, ref, fill


@pytest.mark.slow
def test_a_planted_large_difference_stops_early_and_declares_the_winner(tmp_path):
    """With ``runner.repeats=2``: each round is whole tasks with both their repeats, and the
    intervals count tasks, not answers."""
    from tests.conftest import all_runs, client_for, run_cli

    docs, ref, fill = planted_folder(tmp_path / "data", 40)
    result = run_cli(tmp_path, "system=external", f"system.predictions={ref},{fill}",
                     "dataset=folder", f"dataset.root={docs}", "metrics.scorers=[rouge]",
                     "runner.sequential=true", "runner.batch_size=5", "runner.repeats=2",
                     "report.decide_on=[rouge1_f1]")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = all_runs(tmp_path)
    jobs = [r for r in runs if r.data.tags.get("role") != "sweep_parent"]
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep_parent")
    client = client_for(tmp_path)
    looks = [json.loads(line) for line in Path(client.download_artifacts(
        parent.info.run_id, "sequential.jsonl", str(tmp_path / "looks"))).read_text().splitlines()]
    assert looks[-1]["stop"] == "decided" and looks[-1]["tasks"] < 40
    assert [look["tasks"] for look in looks] == [5 * (i + 1) for i in range(len(looks))]
    assert all(look["stop"] is None for look in looks[:-1])
    # every look's intervals are over whole tasks, one pair per task whatever its repeats
    assert all(c["n"] == look["tasks"] for look in looks for c in look["comparisons"])
    done = looks[-1]["tasks"]
    for job in jobs:  # no task past the stop; each task of the order with both its repeats
        # each round's run logged its tasks and answers: every round whole tasks, both repeats
        history = [[m.value for m in client.get_metric_history(job.info.run_id, key)]
                   for key in ("n_task_ids", "n_tasks")]
        assert history == [[look["tasks"] for look in looks], [2 * look["tasks"] for look in looks]]
        path = client.download_artifacts(job.info.run_id, "predictions.jsonl",
                                         str(tmp_path / job.info.run_id))
        answers = [json.loads(line) for line in Path(path).read_text().splitlines()]
        assert sorted((a["id"], a["repeat"]) for a in answers) == sorted(
            (t, r) for t in run_order((f"t{i:02d}" for i in range(40)), 0)[:done] for r in (0, 1))
    report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                            str(tmp_path / "report"))).read_text()
    assert f"Decided after {looks[-1]['tasks']} of 40 tasks" in report
    assert "**ref** is better on `rouge1_f1`" in report
    assert f"Decided after {looks[-1]['tasks']} of 40 tasks" in result.stdout  # key finding


def test_a_sequential_dry_run_prices_a_range_from_the_first_look_to_the_full_set(tmp_path):
    from runners import dryrun

    for run, cost in (("arag", 49.0), ("naive", 18.5)):  # 495 tasks each
        dryrun.record(tmp_path, {"run": run, "calls": 495, "cost_usd": cost,
                                 "parts": {"system": cost}, "tasks": 495})
    runner = SimpleNamespace(sequential=True, batch_size=20, max_tasks=None)
    text = dryrun.sweep_total(tmp_path, runner)
    assert "estimated cost $67.5000" in text
    assert "between $2.7273 (stopped at the first look, after 20 of 495 tasks) and $67.5000 " \
           "(after 495 tasks)" in text
    runner.max_tasks = 99
    assert "and $13.5000 (after 99 tasks (runner.max_tasks))" in dryrun.sweep_total(tmp_path, runner)
    runner.sequential = False
    assert "sequential" not in dryrun.sweep_total(tmp_path, runner)


def test_a_runs_sequential_settings_are_read_from_its_params():
    from report.analyses.sequential import settings_of

    assert settings_of({"runner.sequential": "True", "runner.order_seed": "7",
                        "runner.max_tasks": "null"}) == {"order_seed": 7, "max_tasks": None}
    assert settings_of({"runner.sequential": "True", "runner.max_tasks": "60"})["max_tasks"] == 60
    assert settings_of({"runner.sequential": "False"}) is None


def recall_folder(root: Path, n: int) -> Path:
    """``n`` calls of ten one-sentence lines, four of them the gold: a system that reads one
    chunk finds at most a quarter of the gold, one that reads eight most of it."""
    import random

    rng = random.Random(0)
    words = ("revenue margin guidance growth cash dividend segment outlook costs demand "
             "pricing volume backlog orders churn capex").split()
    docs = root / "docs"
    docs.mkdir(parents=True)
    tasks = []
    for i in range(n):
        lines = [" ".join(rng.choice(words) for _ in range(18)) + "." for _ in range(10)]
        (docs / f"call_{i:02d}.txt").write_text("\n".join(lines) + "\n")
        gold = sorted(rng.sample(range(1, 11), 4))
        tasks.append({"id": f"t{i:02d}", "doc_ids": [f"call_{i:02d}"],
                      "question": "Summarize the call.", "reference": lines[gold[0] - 1],
                      "gold": [{"line": g} for g in gold]})
    (docs / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return docs


@pytest.mark.slow
def test_a_claude_sweep_killed_mid_round_resumes_and_decides_with_far_fewer_requests(tmp_path):
    """naive with top_k=1 against top_k=8 on retrieval recall, against the fake Anthropic
    API: killed in its second round, run again, it asks each task once and stops early; run
    once more, it asks nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests import forked
    from tests.anthropic_fake import FakeAnthropic
    from tests.conftest import ROOT, all_runs, client_for, store_overrides

    n = 60
    docs = recall_folder(tmp_path / "data", n)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}

    def command(fake: FakeAnthropic, run: int) -> list[str]:
        return [sys.executable, "run.py", "-m", "system=naive", "system.top_k=1,8",
                "dataset=folder", f"dataset.root={docs}", "model=claude-haiku-4-5",
                f"model.base_url={fake.url}", "metrics.scorers=[retrieval]",
                "retrieval.chunk_size=25", "runner.concurrency=1", "cache.mode=off",
                "runner.sequential=true", "runner.batch_size=5",
                "report.decide_on=[retrieval_recall]", *store_overrides(tmp_path),
                f"hydra.sweep.dir={tmp_path}/multirun/{run}"]

    with FakeAnthropic(delay=0.3) as fake:
        first = forked.Popen(command(fake, 0), cwd=ROOT, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        looks_file = tmp_path / "multirun/0/sequential.jsonl"
        deadline = time.time() + 300
        while time.time() < deadline and not (looks_file.exists() and len(fake.requests) > 12):
            time.sleep(0.2)  # into the second round: its first tasks are asked
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        asked_before = len(fake.requests)
        assert 10 < asked_before < 20, asked_before  # killed mid-round
        again = forked.run(command(fake, 1), cwd=ROOT, env=env, timeout=600)
        requests = len(fake.requests)
        finished = forked.run(command(fake, 2), cwd=ROOT, env=env, timeout=600)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert len(fake.requests) == requests  # a finished sequential sweep asks nothing
    assert again.returncode == 0, again.stderr[-3000:]
    client = client_for(tmp_path)
    runs = all_runs(tmp_path)
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep_parent"
                  and r.info.status == "FINISHED")
    looks = [json.loads(line) for line in Path(client.download_artifacts(
        parent.info.run_id, "sequential.jsonl", str(tmp_path / "looks"))).read_text().splitlines()]
    decided = looks[-1]
    assert decided["stop"] == "decided", looks
    assert [look["tasks"] for look in looks] == [5 * (i + 1) for i in range(len(looks))]
    # every task of both systems asked once (one in flight at the kill may be asked again)
    assert 2 * decided["tasks"] <= requests <= 2 * decided["tasks"] + 1
    assert requests <= n  # far fewer than the full sweep's 2 * n
    jobs = [r for r in runs if r.data.tags.get("system") == "naive"]
    assert len(jobs) == 2
    for job in jobs:
        path = client.download_artifacts(job.info.run_id, "predictions.jsonl",
                                         str(tmp_path / job.info.run_id))
        ids = [json.loads(line)["id"] for line in Path(path).read_text().splitlines()]
        assert len(ids) == len(set(ids)) == decided["tasks"]
    report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                            str(tmp_path / "report"))).read_text()
    assert f"Decided after {decided['tasks']} of {n} tasks ($" in report
    assert "is better on `retrieval_recall`" in report


def test_a_sweep_stopped_by_the_cost_cap_says_so_and_declares_nothing():
    from report.analyses.sequential import sequential_verdict
    from report.writers.words import say

    inputs = report_inputs(coin_records(20, 2, planted=False), 20, 120, 0.5)
    inputs.rows[1]["status"] = "KILLED"  # the cost cap stopped this job's run
    found = sequential_verdict(inputs)
    assert found.claims[0].figures["stop"] == "cost_cap"
    assert not any(c.decisive for c in found.claims)
    assert say(found.claims[0]).startswith("Stopped at the cost cap after 20 of 120 tasks "
                                           "($1.00 of an estimated $6.00): undecided")
