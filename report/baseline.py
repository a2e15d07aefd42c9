"""A sweep held against a pinned earlier one (its baseline), task by task: the checks that
make two sweeps comparable, the paired differences, the flipped tasks and the
non-inferiority gate of ``report.fail_on``. The method, its keys and its exit statuses:
docs/ci.md. Both ``report.baseline`` on a sweep and ``python -m report
compare`` read the two sweeps' runs and artifacts (``tracking.sweeps``) and nothing else.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from metrics import Scorer, default_scorers
from metrics.stats import Paired
from report import policy
from report.model import Authority, Claim
from report.verdict import pair_records
from tracking.sweeps import child_runs, find_sweep, run_records, sweep_info
from tracking.traces import trace_ids, trace_route

ARTIFACT = "baseline_comparison.json"
SECTION = "Against the baseline"  # the report section its claims belong to
DIGEST_PARAM = "dataset_digest"
FLIP_SHARE = 0.1  # a task flipped: its difference exceeds this share of the metric's spread
# per task, beside the scores: what a task costs and takes (cost as if nothing were cached)
COST_FIELDS = ("cost_usd_uncached", "cost_usd", "latency_ms", "input_tokens", "output_tokens")
# judge settings that change a score (retries, prices and rate limits do not)
JUDGE_KEYS = ("judge.name", "judge.provider", "judge.model_id", "judge.samples", "judge.panel",
              "judge.max_output_tokens", "judge.base_url")
_NOT_SCORING = ("batch_size",)  # scorer options that change speed, not scores


class NotComparable(Exception):
    """The two sweeps cannot be compared: the message says why and the fix."""


@dataclass(frozen=True)
class Rule:
    metric: str
    margin: float


@dataclass
class Options:
    """What a comparison tests (``report.*``)."""

    rules: list[Rule] = field(default_factory=list)
    decide_on: list[str] = field(default_factory=list)
    min_overlap: float = 0.9
    mapping: dict[str, str] = field(default_factory=dict)  # candidate run -> baseline run
    on_inconclusive: str = "fail"  # what an inconclusive gate does: "fail" or "pass"


@dataclass
class Sweep:
    """A finished sweep as its artifacts have it."""

    parent: Any  # the parent MLflow run
    runs: dict[str, Any]  # run name -> job run (finished or killed by the cost cap)
    records: dict[str, list[dict[str, Any]]]  # run name -> its records

    @property
    def run_id(self) -> str:
        return str(self.parent.info.run_id)

    def describe(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name,
                "experiment_id": self.parent.info.experiment_id,
                "dataset": sorted(self.params("dataset.name")),
                "dataset_digest": sorted(self.digests()) or None,
                "tasks": len(self.task_ids())}

    @property
    def name(self) -> str:
        """The parent's run name; a sweep that varied nothing is named by its sweep id."""
        name = str(self.parent.info.run_name or "").strip()
        return self.parent.data.tags.get("sweep_id", name) if name in ("", "sweep") else name

    def params(self, key: str) -> set[str]:
        return {r.data.params[key] for r in self.runs.values() if key in r.data.params}

    def digests(self) -> set[str]:
        own = self.parent.data.params.get(DIGEST_PARAM)
        return ({own} if own else set()) | self.params(DIGEST_PARAM)

    def task_ids(self) -> set[str]:
        return {str(r["id"]) for recs in self.records.values() for r in recs}

    def system(self, name: str) -> str:
        return str(self.runs[name].data.tags.get("system", name))


def load_sweep(client: Any, ref: str, folder: Path, key: str = "report.baseline") -> Sweep:
    parent = find_sweep(client, ref, key)
    # keyed as the report names them (tag run_label): run names also carry the data label
    runs = {r.data.tags.get("run_label") or r.info.run_name: r
            for r in child_runs(client, sweep_info(parent))
            if r.info.status in ("FINISHED", "KILLED")}
    records = {name: run_records(client, run, folder / run.info.run_id)
               for name, run in runs.items()}
    return Sweep(parent, runs, records)


def check_data(baseline: Sweep, candidate: Sweep) -> dict[str, Any]:
    """The data check: the same digest, or (a digest unknown) the same dataset name."""
    b_digest, c_digest = baseline.digests(), candidate.digests()
    b_name, c_name = baseline.params("dataset.name"), candidate.params("dataset.name")
    fix = ("Fix: run the candidate on the baseline's data, or pin a baseline that ran on "
           "this data (report.baseline=<its parent run id>)")
    if b_digest and c_digest and b_digest != c_digest:
        raise NotComparable(
            f"baseline sweep {baseline.run_id} read other data than the candidate "
            f"{candidate.run_id} (dataset {_names(b_name)}, digest {_names(b_digest)}; the "
            f"candidate's: dataset {_names(c_name)}, digest {_names(c_digest)}): scores of "
            f"other tasks are not comparable. {fix}")
    if b_name != c_name:
        raise NotComparable(
            f"baseline sweep {baseline.run_id} ran on dataset {_names(b_name)}, the "
            f"candidate {candidate.run_id} on {_names(c_name)}: scores on other data are "
            f"not comparable. {fix}")
    known = bool(b_digest and c_digest)
    return {"dataset": sorted(b_name), "digest": sorted(b_digest) if known else None,
            "digest_check": "same" if known else "unknown: a sweep logged no dataset digest, "
            "so only the dataset's name was checked"}


def _names(values: set[str]) -> str:
    return ", ".join(repr(v) for v in sorted(values)) or "(unknown)"


def check_overlap(baseline: Sweep, candidate: Sweep, min_overlap: float) -> dict[str, Any]:
    b_ids, c_ids = baseline.task_ids(), candidate.task_ids()
    common = b_ids & c_ids
    overlap = len(common) / max(len(b_ids), len(c_ids), 1)
    if overlap < min_overlap:
        raise NotComparable(
            f"the sweeps share {len(common)} task ids (baseline {len(b_ids)}, candidate "
            f"{len(c_ids)}): an overlap of {overlap:.2f}, below report.min_overlap="
            f"{min_overlap:g}, so a difference would be one of task sets, not of systems. "
            "Fix: run both on the same tasks (dataset.limit, dataset.split), or lower "
            f"report.min_overlap={overlap:.2f} to compare the common tasks")
    return {"baseline": len(b_ids), "candidate": len(c_ids), "common": len(common),
            "overlap": overlap, "min_overlap": min_overlap}


def match_runs(baseline: Sweep, candidate: Sweep, mapping: dict[str, str]
               ) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(candidate run, baseline run) pairs, and the runs only in the baseline or only in
    the candidate. An explicit mapping first, then equal run names, then systems that
    each sweep runs once."""
    for cand, base in mapping.items():
        if cand not in candidate.runs or base not in baseline.runs:
            raise NotComparable(
                f"report.baseline_map maps {cand!r} to {base!r}, but the candidate's runs are "
                f"{sorted(candidate.runs)} and the baseline's {sorted(baseline.runs)}. Fix: "
                "map candidate run names to baseline run names")
    pairs = dict(mapping)
    pairs.update({n: n for n in candidate.runs if n in baseline.runs and n not in pairs})
    left_c = [n for n in candidate.runs if n not in pairs]
    left_b = [n for n in baseline.runs if n not in pairs.values()]
    for name in list(left_c):
        same = [b for b in left_b if baseline.system(b) == candidate.system(name)]
        if len(same) == 1 and sum(candidate.system(c) == candidate.system(name)
                                  for c in left_c) == 1:
            pairs[name] = same[0]
            left_c.remove(name)
            left_b.remove(same[0])
    return list(pairs.items()), left_b, left_c


def scored_differently(b_run: Any, c_run: Any, metric: str, owners: dict[str, Scorer]
                       ) -> str | None:
    """Why ``metric`` is not comparable between the two runs (their scorer's options or,
    for a judge-scored metric or one no scorer declares, the judge differ), or None."""
    scorer = owners.get(metric)
    prefix = f"metrics.{scorer.name}." if scorer else "metrics."
    judged = scorer is None or type(scorer).judge_requests is not Scorer.judge_requests
    b, c = ({k: v for k, v in run.data.params.items()
             if (k.startswith(prefix) and k.rsplit(".", 1)[-1] not in _NOT_SCORING)
             or (judged and k in JUDGE_KEYS)} for run in (b_run, c_run))
    differ = sorted(k for k in set(b) | set(c) if b.get(k) != c.get(k))
    if not differ:
        return None
    return "scored differently: " + "; ".join(
        f"{k} {b.get(k, '(unset)')!r} in the baseline, {c.get(k, '(unset)')!r} in the "
        "candidate" for k in differ[:4])


def decision_metrics(options: Options, baseline: Sweep, candidate: Sweep) -> list[str]:
    """``report.decide_on`` (else the comparison order) that both sweeps have scores for,
    then every ``fail_on`` metric."""
    def scored(key: str) -> bool:
        return all(any(r.get(key) is not None for recs in s.records.values() for r in recs)
                   for s in (baseline, candidate))

    wanted = options.decide_on or policy.comparison_order()
    return list(dict.fromkeys([m for m in wanted if scored(m)]
                              + [r.metric for r in options.rules]))


def stats(res: Paired | None, n: int, b_vals: list[float], c_vals: list[float]
          ) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "baseline_mean": fmean(b_vals) if b_vals else None,
                           "candidate_mean": fmean(c_vals) if c_vals else None}
    if res is None:
        why = (f"{n} task(s) scored in both runs: at least 2 are needed" if n else
               "no task has this score in both runs (check the metric's name in the records)")
        return {**out, "diff": None, "ci_low": None, "ci_high": None, "p": None,
                "untested": why}
    return {**out, "diff": res.mean_diff, "ci_low": res.ci_low, "ci_high": res.ci_high,
            "p": res.p, "n_untied": res.n_untied, "wins": res.wins, "losses": res.losses}


def flips(ids: list[str], b_vals: list[float], c_vals: list[float], key: str,
          links: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Tasks whose difference exceeds ``FLIP_SHARE`` of the spread of the pair's values,
    each with its two traces (``links``: side -> task id -> MLflow UI route)."""
    values = b_vals + c_vals
    spread = max(values) - min(values) if values else 0.0
    out = []
    for t, b, c in zip(ids, b_vals, c_vals, strict=True):
        diff = c - b
        if spread > 0 and abs(diff) > FLIP_SHARE * spread:
            out.append({"task": t, "baseline": b, "candidate": c, "diff": diff,
                        "direction": "better" if policy.advantage(diff, key) > 0 else "worse",
                        "baseline_trace": links["baseline"].get(t),
                        "candidate_trace": links["candidate"].get(t)})
    return sorted(out, key=lambda f: policy.advantage(f["diff"], key))


def gate(metric_stats: dict[str, Any], rule: Rule, key: str) -> dict[str, Any]:
    """The non-inferiority test of one rule on one metric's paired CI: the outcome
    (``pass``, ``regression`` or ``inconclusive``), the CI of the advantage (positive is
    better) and, when inconclusive, about how many tasks would settle it."""
    worst, best = sorted(policy.advantage(metric_stats[b], key) for b in ("ci_low", "ci_high"))
    outcome = ("pass" if worst >= -rule.margin else
               "regression" if best < -rule.margin else "inconclusive")
    out: dict[str, Any] = {"outcome": outcome, "advantage_ci": [worst, best]}
    if outcome == "inconclusive":
        out["tasks_to_settle"] = tasks_to_settle(metric_stats["n"],
                                                 policy.advantage(metric_stats["diff"], key),
                                                 (best - worst) / 2, rule.margin)
    return out


def tasks_to_settle(n: int, advantage: float, half_width: float, margin: float) -> int | None:
    """About how many paired tasks would put the whole CI on one side of ``-margin``, were
    the mean advantage to hold and the CI to narrow as 1/sqrt(n); None when the mean lies
    on the margin (no number of tasks settles it)."""
    gap = abs(advantage + margin)
    if gap == 0:
        return None
    return max(n + 1, math.ceil(n * (half_width / gap) ** 2))


def compare_pair(baseline: Sweep, candidate: Sweep, names: tuple[str, str],
                 metrics: list[str], owners: dict[str, Scorer]) -> dict[str, Any]:
    """One system of the candidate against its baseline run, every metric."""
    c_name, b_name = names
    b_run, c_run = baseline.runs[b_name], candidate.runs[c_name]
    b_recs, c_recs = baseline.records[b_name], candidate.records[c_name]
    links = {side: _trace_links(run) for side, run in (("baseline", b_run), ("candidate", c_run))}
    out: dict[str, Any] = {"system": c_name, "baseline_system": b_name,
                           "baseline_run_id": b_run.info.run_id,
                           "candidate_run_id": c_run.info.run_id,
                           "metrics": {}, "not_comparable": {}, "costs": {}}
    for key in metrics:
        why = scored_differently(b_run, c_run, key, owners)
        if why:
            out["not_comparable"][key] = why
            continue
        ids, c_vals, b_vals, res = pair_records(c_recs, b_recs, key)
        out["metrics"][key] = {**stats(res, len(ids), b_vals, c_vals),
                               "higher_is_better": policy.higher_is_better(key),
                               "flipped": flips(ids, b_vals, c_vals, key, links)}
    for key in COST_FIELDS:
        ids, c_vals, b_vals, res = pair_records(c_recs, b_recs, key)
        if ids:
            out["costs"][key] = stats(res, len(ids), b_vals, c_vals)
    return out


def _trace_links(run: Any) -> dict[str, str]:
    """Task id -> the MLflow UI route of its trace in ``run``."""
    exp = run.info.experiment_id
    ids = trace_ids(exp, [{"run_id": run.info.run_id}]).get(run.info.run_id, {})
    return {t: trace_route(exp, tr) for t, tr in ids.items()}


def apply_holm(systems: list[dict[str, Any]]) -> None:
    """Holm-adjusted p over every (system, metric) compared, beside the raw p."""
    cells = [m for s in systems for m in s["metrics"].values()]
    for cell, adjusted in zip(cells, policy.adjusted([c["p"] for c in cells]), strict=True):
        cell["p_holm"] = adjusted


def decide(systems: list[dict[str, Any]], rules: list[Rule]) -> dict[str, list[dict[str, Any]]]:
    """Each rule on each system, by outcome: ``regression``, ``inconclusive``, ``pass`` and
    ``untested`` (the rule could not be tested, saying why)."""
    found: dict[str, list[dict[str, Any]]] = {
        "regression": [], "inconclusive": [], "pass": [], "untested": []}
    for rule in rules:
        for s in systems:
            cell = s["metrics"].get(rule.metric)
            why = (s["not_comparable"].get(rule.metric) if cell is None
                   else cell.get("untested"))
            if why or cell is None:
                found["untested"].append({"system": s["system"], "metric": rule.metric,
                                          "why": why or "no scores"})
                continue
            result = gate(cell, rule, rule.metric)
            found[result.pop("outcome")].append(
                {"system": s["system"], "metric": rule.metric, "margin": rule.margin,
                 "n": cell["n"], "diff": cell["diff"], "ci_low": cell["ci_low"],
                 "ci_high": cell["ci_high"], **result})
    return found


def compare(baseline: Sweep, candidate: Sweep, options: Options) -> dict[str, Any]:
    """The comparison as ``baseline_comparison.json`` holds it (``NotComparable`` when the
    sweeps cannot be compared at all)."""
    data = check_data(baseline, candidate)
    overlap = check_overlap(baseline, candidate, options.min_overlap)
    pairs, only_b, only_c = match_runs(baseline, candidate, options.mapping)
    if not pairs:
        raise NotComparable(
            f"no run of the candidate ({sorted(candidate.runs)}) matches one of the baseline "
            f"({sorted(baseline.runs)}). Fix: report.baseline_map=['<candidate run>="
            "<baseline run>']")
    metrics = decision_metrics(options, baseline, candidate)
    owners = {m.name: s for s in default_scorers() for m in s.metrics}
    systems = [compare_pair(baseline, candidate, p, metrics, owners) for p in pairs]
    apply_holm(systems)
    found = decide(systems, options.rules)
    return {"baseline": baseline.describe(), "candidate": candidate.describe(),
            "data": data, "tasks": overlap, "metrics": metrics, "flip_share": FLIP_SHARE,
            "rules": [{"metric": r.metric, "margin": r.margin} for r in options.rules],
            "systems": systems, "only_in_baseline": only_b, "only_in_candidate": only_c,
            "regressions": found["regression"], "inconclusive": found["inconclusive"],
            "passed": found["pass"], "untested": found["untested"],
            "decision": decision(found), "on_inconclusive": options.on_inconclusive}


def decision(found: dict[str, list[dict[str, Any]]]) -> str:
    """The comparison's one word: a regression outweighs a rule not tested, which outweighs
    an inconclusive one."""
    return next((word for word, outcome in (("regressed", "regression"), ("untested", "untested"),
                                            ("inconclusive", "inconclusive")) if found[outcome]),
                "passed")


def run_comparison(client: Any, baseline_ref: str, candidate_ref: str, options: Options
                   ) -> dict[str, Any]:
    """Load both sweeps from the store and compare them."""
    with tempfile.TemporaryDirectory() as tmp:
        baseline = load_sweep(client, baseline_ref, Path(tmp) / "baseline")
        candidate = load_sweep(client, candidate_ref, Path(tmp) / "candidate",
                               key="the candidate")
    if baseline.run_id == candidate.run_id:  # it would pass, and write onto the baseline
        raise NotComparable(f"the baseline {baseline_ref!r} is the candidate sweep itself "
                            f"(run {baseline.run_id}). Fix: name an earlier sweep to hold "
                            "this one against")
    return compare(baseline, candidate, options)


def claims(comparison: dict[str, Any]) -> list[Claim]:
    """The regressions as the answer hears of them: decisive claims of kind ``regression``,
    of the authority that is always stated (``report.answer``)."""
    base = comparison["baseline"]
    return [Claim("regression", SECTION, runs=(r["system"],), metric=r["metric"],
                  difference=r["diff"], ci=(r["ci_low"], r["ci_high"]), n_tasks=r["n"],
                  rule="non-inferiority", authority=Authority.regression, decisive=True,
                  key=True, figures={"margin": r["margin"], "baseline": base["name"],
                                     "baseline_run_id": base["run_id"]})
            for r in comparison["regressions"]]
