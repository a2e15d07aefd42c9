"""The baseline comparison as people and CI read it: the report section, what is logged on
the candidate sweep (artifact, tags, description), the console lines and the exit status.

    python -m report compare <baseline> <candidate> [--fail-on rouge2_f1:0.01 ...]

Exit status (the same for ``report.baseline`` on a sweep; docs/ci.md): 0
every rule passed, 3 a regression, 4 a rule inconclusive (0 with
``report.on_inconclusive=pass``), 2 refused or a rule untested, 1 a crash.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arag.config import ConfigError
from report.baseline import (
    ARTIFACT,
    NotComparable,
    Options,
    Rule,
    claims,
    run_comparison,
)
from report.cli import open_store
from report.overview import BASELINE_HEADING
from report.report import BASELINE_SECTION, add_sections_to_html, stored_report
from report.writers.cells import PLAIN, interval, markdown_table, number, p_value, signed
from report.writers.words import say
from tracking.paths import store_line
from tracking.runs import TrackingError
from tracking.sweeps import SweepNotFound, mark_compared, set_description_section

REGRESSION_EXIT = 3  # a regression: distinct from a crash (1) and from bad input (2)
REFUSED_EXIT = 2
INCONCLUSIVE_EXIT = 4  # the data neither show a regression nor rule one out
EXIT_STATUS = {"passed": 0, "untested": REFUSED_EXIT, "regressed": REGRESSION_EXIT,
               "inconclusive": INCONCLUSIVE_EXIT}
ON_INCONCLUSIVE = ("fail", "pass")
SECTION = BASELINE_SECTION


MAX_MARGIN = 1e6  # a margin beyond any metric's scale (scores, ms, tokens): a gate that never fails


def parse_rules(specs: Iterable[str], key: str = "report.fail_on") -> list[Rule]:
    """``["rouge2_f1:0.01", ...]`` -> rules; a malformed entry (a margin that is not a
    finite number from 0 to ``MAX_MARGIN``), or a second rule for one metric, names the key
    and the fix."""
    rules: dict[str, Rule] = {}
    for spec in specs:
        metric, sep, margin = (part.strip() for part in str(spec).partition(":"))
        try:
            value = float(margin)
        except ValueError:
            value = math.nan
        if not sep or not metric or not 0 <= value <= MAX_MARGIN:  # NaN fails every compare
            raise ConfigError(f"{key} entry {spec!r} is invalid: it must be <metric>:<margin> "
                              f"with a finite margin from 0 to {MAX_MARGIN:g} in the metric's "
                              f"units (nan, inf or a huge margin makes a gate that can never "
                              f"fail). Fix: {_example(key, 'rouge2_f1:0.01')}")
        if metric in rules:
            raise ConfigError(f"{key} has two rules for {metric!r} (margins "
                              f"{rules[metric].margin:g} and {value:g}): a metric is held to "
                              f"one margin. Fix: keep one, e.g. "
                              f"{_example(key, f'{metric}:{min(value, rules[metric].margin):g}')}")
        rules[metric] = Rule(metric, value)
    return list(rules.values())


def parse_map(specs: Iterable[str], key: str = "report.baseline_map") -> dict[str, str]:
    """``["naive v2=naive", ...]`` -> candidate run name -> baseline run name."""
    pairs = {}
    for spec in specs:
        cand, sep, base = (part.strip() for part in str(spec).partition("="))
        if not (sep and cand and base):
            raise ConfigError(f"{key} entry {spec!r} is invalid: it must be <candidate run "
                              f"name>=<baseline run name>. Fix: "
                              f"{_example(key, repr('naive v2=naive'))}")
        pairs[cand] = base
    return pairs


def _example(key: str, entry: str) -> str:
    """How ``entry`` is given: a config list, or a command-line option's argument."""
    return f"{key} {entry}" if key.startswith("--") else f"{key}=[{entry}]"


def exit_status(comparison: dict[str, Any]) -> int:
    """An inconclusive gate fails the command unless ``report.on_inconclusive=pass``."""
    if comparison["decision"] == "inconclusive" and comparison["on_inconclusive"] == "pass":
        return 0
    return EXIT_STATUS[comparison["decision"]]


def outcome(comparison: dict[str, Any]) -> str:
    """What was decided, in lines a CI log shows: each regression (its claim's words), each
    rule not tested, each inconclusive rule with what would settle it; else what passed."""
    base = comparison["baseline"]
    against = f"baseline sweep {base['name']!r} ({base['run_id']})"
    lines = [say(c, PLAIN) for c in claims(comparison)]
    lines += [f"NOT TESTED: {u['system']} on {u['metric']} against {against}: {u['why']}"
              for u in comparison["untested"]]
    lines += [_inconclusive(i, against, comparison["on_inconclusive"])
              for i in comparison["inconclusive"]]
    if lines:
        return "\n".join(lines)
    rules = ", ".join(f"{r['metric']} (margin {r['margin']:g})" for r in comparison["rules"])
    systems = ", ".join(s["system"] for s in comparison["systems"])
    tested = (f"tested {rules} on {systems}: every 95% CI's worse bound lies within its "
              "margin" if rules else
              f"no report.fail_on rule: compared {', '.join(comparison['metrics'])} on {systems}")
    return f"No regression against {against}: {tested}."


def _inconclusive(rule: dict[str, Any], against: str, on_inconclusive: str) -> str:
    need = rule["tasks_to_settle"]
    settle = (f"about {need} paired tasks (now {rule['n']}) would likely settle it, were the "
              "mean difference to hold" if need is not None else
              "its mean lies on the margin, so more tasks alone would not settle it")
    effect = ("report.on_inconclusive=pass: the command does not fail on it"
              if on_inconclusive == "pass" else
              "this fails the command (report.on_inconclusive=fail)")
    return (f"INCONCLUSIVE: {rule['system']} on {rule['metric']} against {against}: the 95% "
            f"CI of its advantage (candidate minus baseline, positive is better) is "
            f"{interval(rule['advantage_ci'], 4, sign=True)}, the margin {rule['margin']:g}: "
            f"the data allow a drop beyond the margin but do not show one; {settle}. Widen "
            f"the margin, add tasks or repeats; {effect}")


def markdown(comparison: dict[str, Any]) -> str:
    """The report section: comparability, the gate's outcome, the paired differences, the
    flipped tasks with links to both traces, and cost, latency and token deltas."""
    base, data, tasks = comparison["baseline"], comparison["data"], comparison["tasks"]
    parts = [SECTION, "",
             f"Baseline: sweep `{base['name']}` (run `{base['run_id']}`, "
             f"[open](#/experiments/{base['experiment_id']}/runs/{base['run_id']})). "
             f"Dataset {', '.join(data['dataset'])}; digest: {data['digest_check']}. Tasks: "
             f"{tasks['common']} in common (baseline {tasks['baseline']}, candidate "
             f"{tasks['candidate']}; overlap {tasks['overlap']:.2f}, at least "
             f"{tasks['min_overlap']:g} required).", "", f"**{outcome(comparison)}**", ""]
    for side, extra in (("baseline", ""),
                        ("candidate", "; `report.baseline_map` maps a run to a baseline run")):
        if comparison[f"only_in_{side}"]:
            parts += [f"Only in the {side} (not compared{extra}): "
                      f"{', '.join(comparison[f'only_in_{side}'])}.", ""]
    parts.append("Candidate minus baseline, paired by task (per-task means over repeats), on "
                 "the tasks both answered: mean difference, paired bootstrap 95% CI, Wilcoxon "
                 "p and Holm-adjusted p over every metric and system compared. Flipped: tasks "
                 f"whose difference exceeds {comparison['flip_share']:g} of the metric's "
                 "spread (docs/ci.md).\n")
    for system in comparison["systems"]:
        parts += _system_section(system)
    return "\n".join(parts) + "\n"


def _system_section(system: dict[str, Any]) -> list[str]:
    title = system["system"] if system["system"] == system["baseline_system"] else \
        f"{system['system']} (baseline: {system['baseline_system']})"
    rows = [[f"`{key}`", c["n"], c["baseline_mean"], c["candidate_mean"], c["diff"],
             interval(_ci(c), sign=True), p_value(c["p"]), p_value(c.get("p_holm")),
             f"{sum(f['direction'] == 'better' for f in c['flipped'])} better / "
             f"{sum(f['direction'] == 'worse' for f in c['flipped'])} worse"]
            for key, c in system["metrics"].items()]
    out = [f"### {title}", "", markdown_table(["metric", "tasks", "baseline", "candidate", "diff",
                                               "95% CI", "p", "p (Holm)", "flipped"], rows)]
    out += [f"Not comparable: `{key}`, {why}." for key, why in system["not_comparable"].items()]
    out += [_flip_line(key, f) for key, c in system["metrics"].items() for f in c["flipped"]]
    costs = [[key, c["n"], *(number(c[v], 5 if "cost" in key else 1)
                             for v in ("baseline_mean", "candidate_mean", "diff")),
              interval(_ci(c), 5 if "cost" in key else 1, sign=True)]
             for key, c in system["costs"].items()]
    if costs:
        out += ["", "Cost (USD, as if nothing came from the response cache: "
                "`cost_usd_uncached`), latency (ms) and tokens per task:", "",
                markdown_table(["per task", "tasks", "baseline", "candidate", "diff", "95% CI"],
                               costs)]
    return [*out, ""]


def _ci(cell: dict[str, Any]) -> tuple[float, float] | None:
    return None if cell.get("ci_low") is None else (cell["ci_low"], cell["ci_high"])


def _flip_line(key: str, flip: dict[str, Any]) -> str:
    links = "".join(f" [{side} trace]({flip[f'{side}_trace']})"
                    for side in ("baseline", "candidate") if flip.get(f"{side}_trace"))
    return (f"- {flip['direction']}: `{flip['task']}` `{key}` {number(flip['baseline'])} → "
            f"{number(flip['candidate'])} ({signed(flip['diff'])}){links}")


def publish(client: Any, comparison: dict[str, Any]) -> None:
    """On the candidate's parent run: ``baseline_comparison.json``, the section in
    ``report.md``, the description's link to the baseline, and the tags."""
    run_id = comparison["candidate"]["run_id"]
    section = markdown(comparison)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / ARTIFACT).write_text(json.dumps(comparison, indent=2), encoding="utf-8")
        client.log_artifact(run_id, str(folder / ARTIFACT))
        report = stored_report(client, run_id)
        (folder / "report.md").write_text(report.split(SECTION, 1)[0].rstrip() + "\n\n"
                                          + section, encoding="utf-8")
        client.log_artifact(run_id, str(folder / "report.md"))
    base = comparison["baseline"]
    set_description_section(client, run_id, BASELINE_HEADING,
                            f"[baseline sweep {base['name']}](#/experiments/"
                            f"{base['experiment_id']}/runs/{base['run_id']}): "
                            f"{outcome(comparison)} Details: `report.md`, `{ARTIFACT}`.")
    mark_compared(client, run_id, base["run_id"], outcome(comparison),
                  regressed=comparison["decision"] == "regressed")


def options_from(cfg: Any, flags: bool = False) -> Options:
    """The comparison's options from the ``report`` config node, or (``flags``) from the
    command's options, whose names the errors then give."""
    return Options(rules=parse_rules(cfg.fail_on, "--fail-on" if flags else "report.fail_on"),
                   decide_on=list(cfg.decide_on), min_overlap=float(cfg.min_overlap),
                   mapping=parse_map(cfg.baseline_map, "--map" if flags else "report.baseline_map"),
                   on_inconclusive=str(cfg.on_inconclusive))


def compare_and_publish(client: Any, baseline: str, candidate: str, options: Options,
                        record: bool = True, comparison: dict[str, Any] | Exception | None = None
                        ) -> tuple[int, str]:
    """(exit status, what to print): the comparison (``comparison``: one already made, or
    why it could not be: it is not tried again),
    logged on the candidate when ``record`` (its report.md and report.html, the description,
    the tags), or the reason it was refused (nothing logged). Without ``record`` nothing in
    the store changes: a what-if comparison never rewrites a stored sweep."""
    try:
        if isinstance(comparison, Exception):
            raise comparison
        comparison = comparison or run_comparison(client, baseline, candidate, options)
    except (NotComparable, SweepNotFound) as exc:
        return REFUSED_EXIT, f"baseline comparison refused: {exc}"
    if record:
        publish(client, comparison)
        add_sections_to_html(client, comparison["candidate"]["run_id"])
    return exit_status(comparison), outcome(comparison)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m report compare",
        description="Compare a finished sweep (candidate) with a baseline sweep, task by task; "
                    "exit 3 on a regression under --fail-on, 4 when a rule is inconclusive "
                    "(unless --on-inconclusive pass), 2 when refused, 0 otherwise.")
    for side in ("baseline", "candidate"):
        parser.add_argument(side, help="parent run id, sweep name, or <tag>=<value>")
    parser.add_argument("--fail-on", nargs="*", default=[], metavar="METRIC:MARGIN")
    parser.add_argument("--decide-on", nargs="*", default=[], metavar="METRIC")
    parser.add_argument("--min-overlap", type=float, default=Options.min_overlap)
    parser.add_argument("--map", nargs="*", default=[], dest="baseline_map",
                        metavar="CANDIDATE=BASELINE", help="candidate run name = baseline run name")
    parser.add_argument("--on-inconclusive", choices=ON_INCONCLUSIVE, default="fail",
                        help="what a rule whose CI straddles the margin does to the exit "
                             "status (default: fail)")
    parser.add_argument("--record", action="store_true",
                        help="log the comparison on the candidate sweep (baseline_comparison."
                             "json, the section of report.md and report.html, its description "
                             "and tags); without it nothing in the store is changed")
    parser.add_argument("--tracking-uri", default=None,
                        help="the MLflow store (default: $MLFLOW_TRACKING_URI, else "
                             "sqlite:///mlruns/mlflow.db)")
    args = parser.parse_args(argv)
    try:
        options = options_from(args, flags=True)
        uri, configured = open_store(args.tracking_uri)
    except (ConfigError, TrackingError) as exc:
        parser.error(str(exc))
    import mlflow
    from mlflow import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per file
    print(store_line(configured, uri), file=sys.stderr)
    mlflow.set_tracking_uri(uri)  # traces are found through the fluent API
    status, text = compare_and_publish(MlflowClient(tracking_uri=uri), args.baseline,
                                       args.candidate, options, record=args.record)
    print(text)
    if not args.record:
        print("(not recorded on the candidate sweep: add --record to log it there)",
              file=sys.stderr)
    return status
