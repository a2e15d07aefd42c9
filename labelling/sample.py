"""``python -m report label-sample <sweep>``: the answers of a judged sweep for people to
label, so the report can hold the judge against them (``report.human_labels``).

The sample is stratified by run and by the judge's score on the first dimension: answers
are drawn in turn from each (run, judge score) group, at random within a group (seeded),
so every run and every score the judge gave is labelled, the rare low scores included.
``--for ppi`` draws for the corrected means instead (``report/analyses/corrected.py``): the same
tasks for every run (a corrected difference needs both answers labelled), from each judge
score in proportion to how often it occurs (the labelled tasks must stand for all of them,
as PPI++ assumes), and says the CI width of the corrected mean to expect for n labels.
It is written as a labels-file template (one JSON line per answer and dimension, ``score``
and ``labeller`` null, the question and the answer beside them) and, with ``--html``, as a
labelling page (``labelling.page``). A template never replaces a file holding filled-in
scores (``--force`` moves it aside first); the same path for both, a missing folder, a size
below 1 and a dimension no judge scored are refused with the fix. The default sample draws
the same tasks for every run wherever its strata allow, so its labels serve PPI too.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from labelling.page import SCALES, Picked, Traces, labelled_name, page, page_answers
from labelling.sources import Read, run_sources
from metrics.ppi import width_without_labels
from tracking.human_labels import FIVE_POINT, judged_fields
from tracking.paths import default_tracking_uri, resolve_tracking_uri, ui_address
from tracking.runs import TrackingError
from tracking.sweeps import child_runs, find_sweep, run_records, sweep_info
from tracking.traces import trace_ids, trace_route

# 60 answers: 20 per run of a three-system sweep; on 60 pairs a moderate weighted kappa has a
# 95% CI about +-0.15 wide (yes/no: +-0.2), enough to tell "fair" from "good" (simulated)
DEFAULT_SIZE = 60
DEFAULT_DIMENSIONS = ("geval_faithfulness", "geval_coverage")
ONE_SCORE = "no width to expect before labels: the judge gave one score throughout"


def stratified_sample(records: dict[str, list[dict[str, Any]]], dimension: str, size: int,
                      seed: int = 0) -> list[Picked]:
    """Up to ``size`` answers (run label -> its records), in turn from each (run, judge
    score) group; answers with an error or without a judge score are not drawn."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for run, recs in sorted(records.items()):
        for rec in recs:
            score = rec.get(dimension)
            if rec.get("predicted") and isinstance(score, int | float) and not rec.get("error") \
                    and int(rec.get("repeat") or 0) == 0:
                groups[(run, round(float(score)))].append(rec)
    # one seeded order of the tasks for every run, and a task already drawn for another run
    # first: the runs share their labelled tasks wherever their strata allow (for PPI too)
    ids = sorted({r["id"] for group in groups.values() for r in group})
    random.Random(seed).shuffle(ids)
    rank = {task: k for k, task in enumerate(ids)}
    queues = [(key[0], sorted(groups[key], key=lambda r: rank[r["id"]])) for key in sorted(groups)]
    picked: list[Picked] = []
    drawn: set[str] = set()
    while len(picked) < size and any(group for _, group in queues):
        for run, group in queues:
            if group and len(picked) < size:
                at = next((k for k, r in enumerate(group) if r["id"] in drawn), 0)
                picked.append((run, group.pop(at)))
                drawn.add(picked[-1][1]["id"])
    return picked


def shared_tasks(picked: list[Picked], runs: int) -> int:
    """How many of the picked tasks are drawn for every one of ``runs`` runs."""
    by_task: dict[str, set[str]] = defaultdict(set)
    for run, rec in picked:
        by_task[rec["id"]].add(run)
    return sum(1 for found in by_task.values() if len(found) >= runs)


def _scored(recs: list[dict[str, Any]], dimension: str) -> list[dict[str, Any]]:
    return [r for r in recs if r.get("predicted") and isinstance(r.get(dimension), int | float)
            and not r.get("error") and int(r.get("repeat") or 0) == 0]


def ppi_sample(records: dict[str, list[dict[str, Any]]], dimension: str, size: int,
               seed: int = 0) -> list[Picked]:
    """``size`` answers: the same tasks for every run (a corrected difference needs both
    answers of a task labelled), drawn from each judge score (the runs' mean, rounded) in
    proportion to how often it occurs (largest remainders), at random within a score."""
    scored = {run: {r["id"]: r for r in _scored(recs, dimension)} for run, recs in records.items()}
    runs = sorted(run for run in scored if scored[run])
    if not runs:
        return []
    common = sorted(set.intersection(*(set(scored[run]) for run in runs)))
    quota = min(len(common), size // len(runs))
    groups: dict[int, list[str]] = defaultdict(list)
    for task in common:
        groups[round(sum(float(scored[run][task][dimension]) for run in runs) / len(runs))
               ].append(task)
    shares = {g: quota * len(v) / len(common) for g, v in groups.items()} if common else {}
    counts = {g: int(x) for g, x in shares.items()}
    for g in sorted(shares, key=lambda g: counts[g] - shares[g])[:quota - sum(counts.values())]:
        counts[g] += 1
    rng = random.Random(seed)
    tasks = [t for g in sorted(groups) for t in rng.sample(groups[g], counts[g])]
    return [(run, scored[run][task]) for run in runs for task in tasks]


def expected_widths(records: dict[str, list[dict[str, Any]]], dimension: str,
                    sizes: list[int]) -> list[str]:
    """Per run, the corrected mean's CI width to expect for each n in ``sizes``."""
    out = []
    for run in sorted(records):
        judged = [float(r[dimension]) for r in _scored(records[run], dimension)]
        widths = [(n, width_without_labels(judged, n)) for n in sizes if n < len(judged)]
        shown = ", ".join(f"n={n}: {w:.2f}" for n, w in widths if w is not None)
        out.append(f"  {run}: {shown or ONE_SCORE}")
    return out


def template_lines(picked: list[Picked], dimensions: list[str], scale: str = FIVE_POINT
                   ) -> list[dict[str, Any]]:
    """One line per answer and dimension, on ``scale``, ``score`` and ``labeller`` null."""
    return [{"task_id": rec["id"], "system": run, "dimension": dim, "scale": scale,
             "score": None, "labeller": None, "question": rec.get("question"),
             "answer": rec.get("predicted")}
            for run, rec in picked for dim in dimensions]


def read_sources(client: Any, runs: dict[str, str], picked: list[Picked]
                 ) -> dict[tuple[str, str], Read]:
    """What each picked answer was judged against (``runs``: run label -> run id), by run
    label and answer key."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run, rec in picked:
        by_run[run].append(rec)
    with tempfile.TemporaryDirectory() as tmp:
        return {(run, key): found for run, recs in by_run.items()
                for key, found in run_sources(client, runs[run], recs,
                                              Path(tmp) / runs[run]).items()}


def sweep_records(client: Any, ref: str
                  ) -> tuple[str, dict[str, list[dict[str, Any]]], Traces, dict[str, str]]:
    """The sweep's name, its finished runs' records by run label, each answer's trace
    address in the MLflow UI, and each run's id by its label."""
    parent = find_sweep(client, ref, key="label-sample")
    runs = [r for r in child_runs(client, sweep_info(parent)) if r.info.status == "FINISHED"]
    labels = {r.info.run_id: r.data.tags.get("run_label") or r.info.run_name for r in runs}
    with tempfile.TemporaryDirectory() as tmp:
        records = {labels[r.info.run_id]: run_records(client, r, Path(tmp) / r.info.run_id)
                   for r in runs}
    experiment = parent.info.experiment_id
    found = trace_ids(experiment, [{"run_id": r.info.run_id} for r in runs])
    traces = {(labels[run_id], task): f"{ui_address()}/{trace_route(experiment, trace)}"
              for run_id, by_task in found.items() for task, trace in by_task.items()}
    return parent.info.run_name, records, traces, {label: rid for rid, label in labels.items()}


def filled_in(path: Path) -> int:
    """How many lines of a labels file carry a score (0: none, or no such file)."""
    if not path.is_file():
        return 0
    count = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line.removeprefix("\ufeff"))
        except ValueError:
            count += bool(line.strip())  # a line that is not JSON may be someone's work
            continue
        count += isinstance(item, dict) and item.get("score") is not None
    return count


def set_aside(path: Path) -> Path | None:
    """``path`` moved to ``<path>.<time>.bak`` when it holds any label (None: nothing kept)."""
    if not filled_in(path):
        return None
    import time

    backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    path.replace(backup)
    return backup


def refusal(args: argparse.Namespace) -> str | None:
    """Why label-sample must not write what it was asked to, with the fix (None: it may)."""
    out = Path(args.out)
    if args.size < 1:
        return f"--size {args.size}: a sample holds at least 1 answer. Fix: --size {DEFAULT_SIZE}"
    if args.html and Path(args.html).resolve() == out.resolve():
        return (f"--out and --html are both {args.out}: the page would replace the template. "
                f"Fix: --html {out.with_suffix('.html').name}")
    for flag, path in (("--out", out), ("--html", Path(args.html) if args.html else None)):
        if path is not None and not path.resolve().parent.is_dir():
            return (f"{flag} {path}: the folder {path.parent} does not exist. Fix: mkdir -p "
                    f"{path.parent}, or give a path in an existing folder")
    held = filled_in(out)
    if held and not args.force:
        return (f"--out {args.out} holds {held} filled-in label(s), which a new template would "
                "overwrite. Fix: --out <another file> (e.g. labels.2.jsonl), or --force to "
                "replace it (it is kept as <out>.<time>.bak first)")
    return None


def judged_dimensions(client: Any, run_ids: Any) -> list[str]:
    """The fields a judge scored in these runs."""
    return judged_fields([dict(client.get_run(rid).data.metrics) for rid in run_ids])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m report label-sample",
        description="Write a sample of a judged sweep's answers for people to label.")
    parser.add_argument("sweep", help="the sweep's parent run id, name or <tag>=<value>")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"answers to sample (default {DEFAULT_SIZE})")
    parser.add_argument("--dimension", action="append", dest="dimensions",
                        help="a judge score to label (repeatable; default: "
                             + ", ".join(DEFAULT_DIMENSIONS) + ")")
    parser.add_argument("--scale", choices=sorted(SCALES), default=FIVE_POINT,
                        help="the scale people label on (written on every line)")
    parser.add_argument("--for", dest="purpose", choices=["agreement", "ppi"],
                        default="agreement",
                        help="agreement: every judge score labelled, the rare ones too "
                             "(kappa); ppi: a sample that stands for each run's tasks, for "
                             "the corrected means (report/analyses/corrected.py)")
    parser.add_argument("--out", default="labels.jsonl", help="the labels-file template")
    parser.add_argument("--html", default=None,
                        help="also write this labelling page (it saves the labels as "
                             "<out>.labelled.jsonl, beside the template)")
    parser.add_argument("--tracking-uri", default=default_tracking_uri(),
                        help="the MLflow store (default: $MLFLOW_TRACKING_URI, else "
                             "sqlite:///mlruns/mlflow.db)")
    parser.add_argument("--force", action="store_true",
                        help="replace an --out file that holds filled-in scores (it is kept "
                             "as <out>.<time>.bak first)")
    args = parser.parse_args(argv)
    refused = refusal(args)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    import mlflow
    from mlflow import MlflowClient

    uri = resolve_tracking_uri(args.tracking_uri)
    mlflow.set_tracking_uri(uri)  # traces are found through the fluent API
    client = MlflowClient(tracking_uri=uri)
    try:
        name, records, traces, run_ids = sweep_records(client, args.sweep)
    except TrackingError as exc:  # no such sweep: one line and the fix
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dimensions = args.dimensions or list(DEFAULT_DIMENSIONS)
    judged = judged_dimensions(client, run_ids.values())
    unjudged = [d for d in dimensions if d not in judged]
    if args.dimensions and unjudged:  # a template report.human_labels would then refuse
        print(f"error: --dimension {', '.join(unjudged)}: no judge of {name!r} scored it, so "
              "its labels could be held against nothing. Fix: --dimension "
              + (" --dimension ".join(judged) if judged else "<a judged score> (run the sweep "
                 "with judge=...)"), file=sys.stderr)
        return 2
    draw = ppi_sample if args.purpose == "ppi" else stratified_sample
    picked = draw(records, dimensions[0], args.size)
    if not picked:
        print(f"error: no answer of {name!r} has a {dimensions[0]} score to stratify by. Fix: "
              "label a judged sweep (judge=...), or name a score it has with --dimension",
              file=sys.stderr)
        return 2
    lines = template_lines(picked, dimensions, args.scale)
    backup = set_aside(Path(args.out)) if args.force else None
    Path(args.out).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    print(f"{len(picked)} answers x {len(dimensions)} dimension(s) -> {args.out}"
          + (f" (the labels it held are kept in {backup})" if backup else ""))
    runs = len({run for run, _ in picked})
    print(f"{shared_tasks(picked, runs)} task(s) drawn for every one of the {runs} run(s): "
          "labels of those serve the corrected means (PPI) too")
    if args.purpose == "ppi":
        per_run = max(1, len(picked) // max(1, len(records)))
        print(f"95% CI width of the corrected {dimensions[0]} mean to expect with n labels "
              "per run (people's labels alone; the judge narrows it as far as it agrees "
              "with people; the corrected figure decides with at least 10 per run):")
        print("\n".join(expected_widths(records, dimensions[0],
                                        sorted({10, 20, 40, per_run}))))
    if args.html:
        save_as = labelled_name(args.out)
        answers = page_answers(picked, dimensions, traces, read_sources(client, run_ids, picked))
        Path(args.html).write_text(page(answers, f"Label: {name}", args.scale, save_as),
                                   encoding="utf-8")
        print(f"labelling page -> {args.html} (it saves {save_as})")
    return 0
