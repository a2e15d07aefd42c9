"""Benchmark: scoring prediction files made elsewhere (``system=external``), stage by stage.

    .venv/bin/python bench/scoring.py                      # ECTSum val, 3 files, 747 task-runs
    .venv/bin/python bench/scoring.py --limit 40           # the first 40 tasks of each file
    .venv/bin/python bench/scoring.py --split train --limit 495   # 1,485 task-runs

Writes three prediction files for ECTSum val (made here, without contexts, as a team's
pipeline outside the harness would give them: the transcript's lead, its sentences with
figures, its closing) and runs the real sweep on them in a child process

    python run.py -m system=external system.predictions=lead.jsonl,figures.jsonl,tail.jsonl
        dataset=ectsum dataset.split=val   (into a fresh temporary store)

with a timer around each stage of the harness (load and parse, each scorer, the records,
traces, scores on traces, the run's logging and plots, the parent report). A stage's time
is its own: a stage called inside another is counted in the inner one only. Printed: the
wall time of each stage and its ratio to rouge-score alone computing ROUGE-1/2/L on the
same pairs in the same run (before and after the sweep: the smaller), the harness's whole
wall time per task-run and its ratio to rouge-score, the same for its own work (the whole
less the libraries' stages: BERTScore's model and arithmetic, rouge-score), the time the
garbage collector took inside those stages, the device BERTScore ran on and its texts per
second. The ratios hold under load; the seconds do not (this machine is shared), so the
load average is printed with them. Not a test; ECTSum's test split is never used.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORDS = 45  # ECTSum's target length


def write_prediction_files(work: Path, split: str, limit: int | None) -> dict[str, Path]:
    """Three pipelines' summaries of every task: the lead, the sentences with figures, the
    closing, each cut to the target length."""
    sys.path.insert(0, str(ROOT))
    from hydra import compose, initialize_config_dir

    from runners.job import load_tasks
    from runners.settings import read

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=ectsum",
                                                       f"dataset.split={split}"])
    dataset = load_tasks(read(cfg).config, call_models=False)
    tasks = dataset.tasks[:limit] if limit else dataset.tasks
    pick = {"lead": lambda lines: lines,
            "figures": lambda lines: [s for s in lines if any(c.isdigit() for c in s)] or lines,
            "tail": lambda lines: lines[::-1]}
    files = {}
    for name, choose in pick.items():
        rows = []
        for task in tasks:
            lines = [s for d in task.doc_ids
                     for s in dataset.corpus.documents[d].text.splitlines() if s.strip()]
            rows.append({"id": task.id, "predicted": _cut(choose(lines), WORDS)})
        files[name] = work / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return files


def _cut(sentences: list[str], words: int) -> str:
    out: list[str] = []
    for sentence in sentences:
        if len(out) >= words:
            break
        out.extend(sentence.split())
    return " ".join(out[:words])


def rouge_seconds(pairs: list[tuple[str, str]]) -> float:
    """rouge-score alone: ROUGE-1/2/L of every (reference, prediction), as the scorer sets it."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scorer.score("warm up the stemmer", "warm up")
    started = time.perf_counter()
    for reference, predicted in pairs:
        scorer.score(reference, predicted)
    return time.perf_counter() - started


# --- the child: the real sweep, each stage timed ---------------------------------------

class StageClock:
    """Wall time per stage, each stage's own (time in a nested stage goes to that one)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # [started, time spent in nested stages]

    def wrap(self, stage: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                started, nested = self._stack.pop()
                spent = time.perf_counter() - started
                self.seconds[stage] += spent - nested
                self.calls[stage] += 1
                if self._stack:
                    self._stack[-1][1] += spent
        return timed


def patch_everywhere(module: Any, name: str, wrapped: Any) -> None:
    """Replace a function in its module and wherever it was imported by name."""
    original = getattr(module, name)
    for mod in list(sys.modules.values()):
        if getattr(mod, name, None) is original:
            setattr(mod, name, wrapped)


def instrument(clock: StageClock) -> None:
    import metrics.bertscore as bertscore
    import report.plots as plots
    import report.report as report
    import runners.callbacks  # noqa: F401 - imported so its names are patched too
    import runners.evaluate as evaluate
    import runners.experiment  # noqa: F401
    import runners.job as job
    import runners.scoring as scoring
    import tracking.traces as traces
    from metrics.base import SCORERS

    for module, name, stage in (
            (job, "load_tasks", "load dataset"), (job, "configure_system", "parse predictions"),
            (evaluate, "evaluate", "records (scoring items, assembly)"),
            (scoring, "score_and_log", "run logging (metrics, artifacts, table)"),
            (traces, "log_task_traces", "traces"),
            (traces, "log_task_assessments", "scores on traces"),
            (report, "write_sweep_report", "parent report"),
            (bertscore, "bertscore_model", "BERTScore model load")):
        patch_everywhere(module, name, clock.wrap(stage, getattr(module, name)))
    for name in dir(plots):
        fn = getattr(plots, name)
        if callable(fn) and getattr(fn, "__module__", "") == plots.__name__ and (
                name.endswith("plot") or name.endswith("plots") or name.endswith("curve")
                or name == "taxonomy_by_system"):
            patch_everywhere(plots, name, clock.wrap("plots", fn))
    for scorer_name, cls in SCORERS.items():  # an inherited score is timed as each scorer's
        timed = clock.wrap(f"scorer {scorer_name}", getattr(cls.score, "__wrapped__", cls.score))
        cls.score = timed  # type: ignore[method-assign]
    _keep_models()


def child(argv: list[str], out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    started = time.perf_counter()
    from arag.memory import pause_for_imports

    pause_for_imports()  # as run.py does when it is the program
    import run as entry  # the entry point's imports count as the harness's work

    clock = StageClock()
    instrument(clock)
    collected = _time_collections()
    sys.argv = ["run.py", *argv]
    try:  # as ``python run.py``: Hydra finds conf/ beside the script it runs
        runpy.run_path(entry.__file__, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        out.write_text(json.dumps({
            "total": time.perf_counter() - started, "seconds": clock.seconds,
            "calls": clock.calls, "collections": collected,
            "bertscore_texts": sum(m.texts_embedded for m in MODELS),
            "bertscore_device": ", ".join(sorted({str(getattr(m, "device", "cpu"))
                                                  for m in MODELS})) or "not loaded"}))


MODELS: list[Any] = []  # the BERTScore models the sweep loaded


def _time_collections() -> dict[str, float]:
    """The garbage collector's time (inside the stages it interrupts), and its collections
    by generation."""
    import gc

    out = {"seconds": 0.0, "young": 0, "middle": 0, "full": 0}
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        out["seconds"] += time.perf_counter() - started[0]
        out[("young", "middle", "full")[info["generation"]]] += 1

    gc.callbacks.append(timed)
    return out


def _keep_models() -> None:
    from metrics.bertscore import BertScoreModel

    init = BertScoreModel.__init__

    def kept(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        MODELS.append(self)

    BertScoreModel.__init__ = kept  # type: ignore[method-assign]


# --- the parent: files, rouge, the child, the table --------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="val", choices=["val", "train"],
                        help="ECTSum split (never test: figures are tuned on val)")
    parser.add_argument("--limit", type=int, default=None, help="first N tasks of each file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep files and store here")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.child_out)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        files = write_prediction_files(work, args.split, args.limit)
        pairs = _pairs(files, args.split)
        rouge_before = rouge_seconds(pairs)
        figures = run_child(work, files, args.split)
        rouge = min(rouge_before, rouge_seconds(pairs))
        print_table(figures, rouge, len(pairs))
    return 0


def _pairs(files: dict[str, Path], split: str) -> list[tuple[str, str]]:
    from hydra import compose, initialize_config_dir

    from runners.job import load_tasks
    from runners.settings import read

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=ectsum",
                                                       f"dataset.split={split}"])
    references = {t.id: t.reference for t in load_tasks(read(cfg).config, False).tasks}
    return [(references[r["id"]], r["predicted"]) for f in files.values()
            for r in map(json.loads, f.read_text(encoding="utf-8").splitlines())]


def run_child(work: Path, files: dict[str, Path], split: str) -> dict[str, Any]:
    store = work / "store"
    out = work / "stages.json"
    argv = ["system=external", "system.predictions=" + ",".join(str(f) for f in files.values()),
            "dataset=ectsum", f"dataset.split={split}", "system.allow_missing=true",
            f"tracking.uri=sqlite:///{store}/mlflow.db",
            f"tracking.artifact_location={store}/artifacts", f"cache.dir={store}/cache",
            f"runner.runs_dir={store}/runs", f"hydra.sweep.dir={store}/sweep",
            "runner.progress=false"]
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child-out",
                           str(out), "--child", "-m", *argv], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the sweep failed (exit {done.returncode})")
    figures = json.loads(out.read_text())
    figures["traces_stored"] = _traces_stored(store)
    return figures


def _traces_stored(store: Path) -> str:
    """How many traces the store holds, and the scores on them (nothing may be dropped)."""
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{store}/mlflow.db")
    experiments = [e.experiment_id for e in mlflow.MlflowClient().search_experiments()]
    traces = mlflow.search_traces(locations=experiments, return_type="list",
                                  include_spans=False, max_results=100000)
    scores = sum(len(t.info.assessments or []) for t in traces)
    return f"{len(traces)} (with {scores} scores)"


# the stages that are a library's work, not the harness's: BERTScore's model and arithmetic,
# rouge-score
LIBRARIES = ("scorer bertscore", "BERTScore model load", "scorer rouge")


def print_table(figures: dict[str, Any], rouge: float, n_pairs: int) -> None:
    seconds: dict[str, float] = figures["seconds"]
    total = figures["total"]
    other = total - sum(seconds.values())
    print(f"load average: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs); "
          f"{n_pairs} task-runs; traces in the store: {figures['traces_stored']}")
    print(f"rouge-score alone, ROUGE-1/2/L on the same pairs: {rouge:.3f} s")
    print(f"{'stage':44s} {'seconds':>9s} {'x rouge':>9s}")
    for stage, spent in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{stage:44s} {spent:9.2f} {spent / rouge:9.1f}")
    print(f"{'other (imports, Hydra, runs, params)':44s} {other:9.2f} {other / rouge:9.1f}")
    print(f"{'whole sweep':44s} {total:9.2f} {total / rouge:9.1f}")
    print(f"per task-run: {1000 * total / n_pairs:.1f} ms, {total / rouge:.1f}x rouge-score")
    own = total - sum(seconds.get(stage, 0.0) for stage in LIBRARIES)
    print(f"the harness's own work (the whole sweep less {', '.join(LIBRARIES)}): "
          f"{own:.2f} s, {1000 * own / n_pairs:.1f} ms a task-run, {own / rouge:.1f}x rouge-score")
    gc = figures.get("collections") or {}
    if gc:
        print(f"garbage collection (inside the stages above): {gc['seconds']:.2f} s; "
              f"{gc['full']} full, {gc['middle']} middle, {gc['young']} young collections")
    bert = seconds.get("scorer bertscore", 0.0)
    texts = figures.get("bertscore_texts", 0)
    print(f"BERTScore on {figures.get('bertscore_device')}: {texts} texts embedded"
          + (f", {texts / bert:.0f} texts/s" if bert and texts else ""))


if __name__ == "__main__":
    sys.exit(main())
