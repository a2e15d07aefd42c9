"""A sequential sweep: its keys are refused with the fix, its rounds answer a growing
prefix of one seeded order, and a round asking more tasks continues a finished run."""

from __future__ import annotations

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
