"""Benchmark: the ECTSum sweep (arag, naive, stuffing), cold and warm, then a chunking sweep.

    .venv/bin/python bench/ectsum_sweep.py --limit 20          # quick check
    .venv/bin/python bench/ectsum_sweep.py                     # all 249 val calls
    .venv/bin/python bench/ectsum_sweep.py --split test        # all 495 test calls

Runs ``python run.py -m system=arag,naive,stuffing dataset=ectsum dataset.split=val`` as a
subprocess against a throw-away tracking store, cache and runs folder (a temporary
directory, or ``--workdir``), then runs the same command again. Reports:

- cold wall time, peak RSS of the sweep process (``os.wait4`` of that child; plus
  ``getrusage(RUSAGE_CHILDREN).ru_maxrss``, the peak over every child so far), the time
  spent embedding and its share of the wall time, and the sentences embedded (the
  ``index <key>: built in ...`` log lines);
- embedding sentences/s against the fp32 roofline of the same sentences: a large fp32
  matrix multiply timed in this run, before the sweep, gives GFLOPS, and MiniLM's FLOPs
  per sentence (their token counts, no padding) turn that into sentences/s
  (``bench/roofline.py``);
- warm wall time and peak RSS (same command, same stores: finished runs are found by config
  hash and reused, predictions resume, the index loads from the cache; with
  ``--warm-rerun`` the warm pass adds ``runner.rerun=true`` and predicts again, served by
  the response cache);
- per system, ROUGE-1/2/L, retrieval recall/precision, Recall@5 and the context it was
  given (chunks, tokens) as logged in MLflow;
- paired differences between every two systems on the tasks both scored (mean, paired
  bootstrap 95% CI, Wilcoxon p and its untied n: ``metrics.stats.paired_difference``, as the
  sweep report computes them)
  for ROUGE-1/2/L and retrieval recall, from each run's ``predictions.eval.jsonl``.
- a third pass, ``system=naive retrieval.chunk_size=60,240`` (``--chunk-sweep``) over the
  same stores: every index is new, every sentence is in the embedding store, so each child
  logs ``index_sentences_embedded`` 0 (printed from MLflow).

Extra Hydra overrides go after ``--``: ``bench/ectsum_sweep.py --limit 5 -- model=offline``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BUILT = re.compile(r"index (\S+): built in ([\d.]+)s \(\d+ chunks; (\d+) sentences embedded in "
                   r"([\d.]+)s")
LOADED = re.compile(r"index (\S+): loaded from cache")
REUSED = re.compile(r"already FINISHED as run")
PAIRED = ("rouge1_f1", "rouge2_f1", "rougeL_f1", "retrieval_recall")
METRICS = ("n_tasks", "rouge1_f1_mean", "rouge2_f1_mean", "rougeL_f1_mean",
           "retrieval_recall_mean", "retrieval_precision_mean", "recall_at_5_mean",
           "cost_usd_total", "latency_ms_p50")


@dataclass
class Pass:
    name: str
    returncode: int = 0
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    embed_s: float = 0.0
    embedded: int = 0
    indexes_built: int = 0
    indexes_loaded: int = 0
    runs_reused: int = 0
    log_file: Path | None = None
    lines: list[str] = field(default_factory=list)


def sweep_command(args: argparse.Namespace, work: Path, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "run.py", "-m", f"system={args.systems}", "dataset=ectsum",
           f"dataset.split={args.split}",
           f"tracking.uri=sqlite:///{work}/mlflow.db",
           f"tracking.artifact_location={work}/artifacts",
           f"cache.dir={work}/cache", f"runner.runs_dir={work}/runs"]
    if args.limit:
        cmd.append(f"dataset.limit={args.limit}")
    return cmd + extra


def run_pass(name: str, cmd: list[str], work: Path, echo: bool) -> Pass:
    result = Pass(name, log_file=work / f"{name}.log")
    cmd = [*cmd, f"hydra.sweep.dir={work}/multirun/{name}"]  # keeps multirun/ out of the repo
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    with open(result.log_file, "w", encoding="utf-8") as log:
        for line in proc.stdout:
            log.write(line)
            result.lines.append(line.rstrip("\n"))
            if echo:
                sys.stderr.write(line)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (incl. its children)
    proc.returncode = os.waitstatus_to_exitcode(status)
    result.wall_s = time.perf_counter() - started
    result.returncode = proc.returncode
    result.peak_rss_mb = usage.ru_maxrss / 1024  # KiB on Linux
    for line in result.lines:
        if m := BUILT.search(line):
            result.embedded += int(m[3])
            result.embed_s += float(m[4])
            result.indexes_built += 1
        if LOADED.search(line):
            result.indexes_loaded += 1
        if REUSED.search(line):
            result.runs_reused += 1
    return result


def latest_runs(work: Path) -> dict[str, object]:
    """system -> its latest child run in the ectsum experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    experiment = client.get_experiment_by_name("ectsum")
    if experiment is None:
        return {}
    latest: dict[str, object] = {}
    for run in client.search_runs([experiment.experiment_id], max_results=1000):
        system = run.data.tags.get("system")
        if not system or run.data.tags.get("role") == "sweep_parent":
            continue
        if system not in latest or run.info.start_time > latest[system].info.start_time:
            latest[system] = run
    return dict(sorted(latest.items()))


def logged_metrics(runs: dict[str, object]) -> dict[str, dict[str, float]]:
    return {system: dict(run.data.metrics) for system, run in runs.items()}


def paired_differences(work: Path, runs: dict[str, object]) -> list[str]:
    """Every two systems, every PAIRED metric: a - b on the tasks both scored."""
    import json

    from mlflow.tracking import MlflowClient

    from metrics.stats import paired_difference

    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    records = {}
    for system, run in runs.items():
        path = client.download_artifacts(run.info.run_id, "predictions.eval.jsonl",
                                         str(work / "paired" / system))
        records[system] = [json.loads(line) for line in Path(path).read_text().splitlines()
                           if line]
    out = ["| pair | metric | tasks (untied) | mean diff | 95% CI | Wilcoxon p | wins/losses "
           "| verdict |", "|---|---|---|---|---|---|---|---|"]
    systems = list(records)
    for i, a in enumerate(systems):
        for b in systems[i + 1:]:
            for key in PAIRED:
                theirs = {r["id"]: r.get(key) for r in records[b]}
                pairs = [(r[key], theirs[r["id"]]) for r in records[a]
                         if r.get(key) is not None and theirs.get(r["id"]) is not None]
                res = paired_difference([x for x, _ in pairs], [y for _, y in pairs])
                if res is None:
                    continue
                out.append(f"| {a} − {b} | {key} | {res.n} ({res.n_untied}) | "
                           f"{res.mean_diff:+.4f} | [{res.ci_low:+.4f}, {res.ci_high:+.4f}] | "
                           f"{res.p_text()} | {res.wins}/{res.losses} | {res.verdict()} |")
    return out


def chunk_children(work: Path, since_ms: int) -> list[tuple[str, float, float]]:
    """(chunk_size, index_sentences_embedded, index_sentences_reused) of the children
    started after ``since_ms``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    experiment = client.get_experiment_by_name("ectsum")
    runs = client.search_runs([experiment.experiment_id], max_results=1000) if experiment else []
    return sorted((r.data.params.get("retrieval.chunk_size", "?"),
                   r.data.metrics.get("index_sentences_embedded", float("nan")),
                   r.data.metrics.get("index_sentences_reused", float("nan")))
                  for r in runs if r.info.start_time >= since_ms
                  and r.data.tags.get("role") != "sweep_parent")


def roofline(args: argparse.Namespace) -> tuple[float, float]:
    """(fp32 GFLOPS, roofline sentences/s) for the distinct sentences of this split."""
    sys.path.insert(0, str(ROOT))
    from hydra import compose, initialize_config_dir
    from roofline import EncoderShape, matmul_gflops, roofline_sentences_per_s
    from transformers import AutoTokenizer

    import runners.config  # noqa: F401  (registers the schema)
    from arag.datasets import load_dataset
    from arag.retrieval import packaged_minilm_path

    overrides = ["dataset=ectsum", f"dataset.split={args.split}"]
    if args.limit:
        overrides.append(f"dataset.limit={args.limit}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    corpus = load_dataset(cfg.dataset, ROOT).corpus
    texts = list({line for d in corpus.documents.values() for line in d.lines})
    path = packaged_minilm_path()
    tokens = [len(i) for i in AutoTokenizer.from_pretrained(path)(
        texts, truncation=True, max_length=256)["input_ids"]]
    gflops = matmul_gflops()
    return gflops, roofline_sentences_per_s(tokens, EncoderShape.of(path), gflops)


def fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def report(args, passes: list[Pass], children_peak_mb: float,
           metrics: dict[str, dict[str, float]], roof: tuple[float, float]) -> str:
    out = [f"ECTSum sweep: systems={args.systems} split={args.split} "
           f"limit={args.limit or 'all'} (2 passes, same stores)", ""]
    out.append(f"{'pass':<6}{'rc':>4}{'wall s':>10}{'peak RSS MB':>13}{'embed s':>10}"
               f"{'idx built':>11}{'idx cached':>12}{'runs reused':>13}")
    for p in passes:
        out.append(f"{p.name:<6}{p.returncode:>4}{p.wall_s:>10.1f}{p.peak_rss_mb:>13.0f}"
                   f"{p.embed_s:>10.1f}{p.indexes_built:>11}{p.indexes_loaded:>12}"
                   f"{p.runs_reused:>13}")
    out.append(f"peak RSS over all children (RUSAGE_CHILDREN): {children_peak_mb:.0f} MB")
    cold = passes[0]
    if cold.embed_s:
        rate = cold.embedded / cold.embed_s
        out.append(f"cold: {cold.embedded} sentences embedded in {cold.embed_s:.1f} s = "
                   f"{100 * cold.embed_s / cold.wall_s:.0f}% of {cold.wall_s:.1f} s wall; "
                   f"{rate:.0f} sentences/s = {100 * rate / roof[1]:.0f}% of the fp32 roofline "
                   f"({roof[1]:.0f} sentences/s at {roof[0]:.0f} GFLOPS, measured before the "
                   "sweep)")
    out.append("")
    cols = ("n_tasks", "rouge1_f1_mean", "rouge2_f1_mean", "rougeL_f1_mean",
            "retrieval_recall_mean", "retrieval_precision_mean", "recall_at_5_mean",
            "context_chunks_mean", "context_tokens_mean")
    heads = ("n", "ROUGE-1", "ROUGE-2", "ROUGE-L", "ret.recall", "ret.prec", "R@5", "ctx.chunks",
             "ctx.tokens")
    out.append(f"{'system':<10}" + "".join(f"{h:>11}" for h in heads))
    for system, m in metrics.items():
        out.append(f"{system:<10}" + "".join(f"{fmt(m.get(c)):>11}" for c in cols))
    if not metrics:
        out.append("(no runs found in the MLflow store)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="dataset.limit (first N calls)")
    parser.add_argument("--split", default="val", help="dataset.split (default: val)")
    parser.add_argument("--systems", default="arag,naive,stuffing")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep stores here (default: a temporary folder, deleted)")
    parser.add_argument("--warm-rerun", action="store_true",
                        help="warm pass with runner.rerun=true (predict again, cached calls)")
    parser.add_argument("--chunk-sweep", default="60,240",
                        help="retrieval.chunk_size values of the third pass ('' to skip)")
    parser.add_argument("--verbose", action="store_true", help="echo the sweep's log")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="ectsum-bench-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        roof = roofline(args)
        cmd = sweep_command(args, work, extra)
        print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
        cold = run_pass("cold", cmd, work, args.verbose)
        warm_cmd = cmd + (["runner.rerun=true"] if args.warm_rerun else [])
        warm = run_pass("warm", warm_cmd, work, args.verbose)
        passes = [cold, warm]
        children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        runs = latest_runs(work)
        print(report(args, passes, children_peak, logged_metrics(runs), roof), flush=True)
        if len(runs) > 1:
            print("\n" + "\n".join(paired_differences(work, runs)), flush=True)
        if args.chunk_sweep:
            since = int(time.time() * 1000)
            chunk_cmd = [c.replace(f"system={args.systems}", "system=naive") for c in cmd]
            passes.append(run_pass("chunks", [*chunk_cmd, f"retrieval.chunk_size={args.chunk_sweep}"],
                                   work, args.verbose))
            print(f"\nsystem=naive retrieval.chunk_size={args.chunk_sweep}, same stores: "
                  f"{passes[-1].wall_s:.1f} s wall")
            for size, embedded, reused in chunk_children(work, since):
                print(f"  chunk_size={size}: index_sentences_embedded={embedded:.0f} "
                      f"index_sentences_reused={reused:.0f}")
        for p in passes:
            if p.returncode:
                tail = "\n".join(p.lines[-15:])
                print(f"\n{p.name} pass exited {p.returncode}; last lines:\n{tail}",
                      file=sys.stderr)
        return max(p.returncode for p in passes)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"stores kept in {work} (logs: cold.log, warm.log)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
