"""Benchmark: a dry run of the FinanceBench QFS sweep on a cold cache.

    .venv/bin/python bench/dry_run.py                     # all 109 tasks over 55 10-Ks
    .venv/bin/python bench/dry_run.py --limit 4           # quick check
    .venv/bin/python bench/dry_run.py -- model=claude-sonnet-4-6   # extra Hydra overrides

Runs ``python run.py -m system=arag,naive,stuffing dataset=financebench_qfs
runner.dry_run=true`` as a subprocess with a fresh cache, tracking store and runs folder (a
temporary directory, or ``--workdir``), so every PDF is parsed and no index exists. Prints
the sweep's wall time, the PDF parsing (the parse cache's entries: filings, pages, the
parser, the summed per-filing parse seconds, and the wall time from the first to the last
entry written), each job's ``index:`` line (sentences embedded and reused) and whether
anything was embedded (an ``embeddings/`` or ``index/`` folder in the cache). Exits 1 when
a sentence was embedded or the sweep failed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FB = ROOT / "data" / "datasets" / "financebench"  # `make data` links it
INDEX_LINE = re.compile(r"^(\S+): index: (\d+) sentences embedded, (\d+) reused", re.MULTILINE)


def sweep_command(work: Path, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, "run.py", "-m", f"system={args.systems}", "dataset=financebench_qfs",
           "runner.dry_run=true", f"dataset.root={args.root}", f"cache.dir={work}/cache",
           f"tracking.uri=sqlite:///{work}/mlflow.db", f"runner.runs_dir={work}/runs",
           f"hydra.sweep.dir={work}/multirun"]
    if args.limit:
        cmd.append(f"dataset.limit={args.limit}")
    return cmd + args.overrides


def parse_summary(parsed: Path) -> str:
    """What the parse cache holds: filings, pages, parser, summed and first-to-last seconds."""
    entries = sorted(parsed.glob("*.json"), key=lambda f: f.stat().st_mtime)
    if not entries:
        return "no PDF parsed"
    data = [json.loads(f.read_text(encoding="utf-8")) for f in entries]
    span = entries[-1].stat().st_mtime - entries[0].stat().st_mtime
    parsers = sorted({d["parser"] for d in data})
    return (f"{len(data)} filings, {sum(len(d['pages']) for d in data)} pages parsed by "
            f"{', '.join(parsers)}: {sum(d['parse_seconds'] for d in data):.1f} s summed over "
            f"filings, {span:.1f} s from the first entry written to the last")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=FB, help="the FinanceBench clone")
    ap.add_argument("--systems", default="arag,naive,stuffing")
    ap.add_argument("--limit", type=int, default=None, help="dataset.limit (default: all)")
    ap.add_argument("--workdir", type=Path, default=None, help="kept (default: a temp dir)")
    ap.add_argument("overrides", nargs="*", help="after --: extra Hydra overrides")
    args = ap.parse_args()
    if not (args.root / "pdfs").is_dir():
        print(f"no FinanceBench PDFs under {args.root}; pass --root", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="dry_run_bench."))
    cmd = sweep_command(work, args)
    print("$", " ".join(cmd), flush=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    print(done.stdout, end="")
    cache = work / "cache"
    jobs = INDEX_LINE.findall(done.stdout)
    embedded = sum(int(n) for _, n, _ in jobs)
    stores = [name for name in ("embeddings", "index") if (cache / name).exists()]
    print(f"\nsweep: exit {done.returncode}, {wall:.1f} s wall")
    print(f"PDF parsing: {parse_summary(cache / 'parsed')}")
    print(f"embedded: {embedded} sentences over {len(jobs)} searching job(s) "
          f"({', '.join(f'{n}: {e}' for n, e, _ in jobs) or 'none'}); cache folders "
          f"{stores or 'none'} of embeddings/ and index/")
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if done.returncode == 0 and embedded == 0 and not stores else 1


if __name__ == "__main__":
    sys.exit(main())
