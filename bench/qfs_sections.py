"""How well the FinanceBench QFS derivation finds its sections, over every 10-K.

    .venv/bin/python bench/qfs_sections.py                 # ../shared/datasets/financebench
    .venv/bin/python bench/qfs_sections.py dataset.root=/data/financebench cache.dir=/tmp/c

Loads ``dataset=financebench_qfs`` (no reference model: no API call) with any extra
overrides, then prints each filing's section pages, the sections not found or cut, the
totals, and the load time (PDF parsing is cached under ``cache.dir``; a cold first load
parses every 10-K with pypdf, ~15 minutes on two cores).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runners.config  # noqa: E402,F401  (registers the schema)
from arag.datasets import load_dataset  # noqa: E402
from runners.paths import resolve  # noqa: E402


def main(overrides: list[str]) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=financebench_qfs", *overrides])
    started = time.perf_counter()
    dataset = load_dataset(cfg.dataset, resolve("."))
    seconds = time.perf_counter() - started
    report = dataset.reports["sections"]
    cut = 0
    for name, sections in report["filings"].items():
        cells = []
        for key, found in sections.items():
            cells.append(f"{key}={tuple(found['pages']) if found['pages'] else None}"
                         + (f" ({found['note']})" if found["note"] else ""))
            cut += "cut at page" in found["note"]
        print(f"{name:36s} " + " | ".join(cells))
    parsing = dataset.reports["pdf_parsing"]
    n_sections = 2 * report["n_filings"]
    print(f"\n{report['n_filings']} 10-Ks, {n_sections} sections: {report['n_tasks']} tasks, "
          f"{report['n_sections_not_found']} not found, {cut} cut at "
          f"dataset.options.max_section_pages={cfg.dataset.options.max_section_pages}")
    print(f"load: {seconds:.1f} s ({parsing['n_parsed']} PDFs parsed, "
          f"{parsing['n_from_cache']} from the parse cache)")


if __name__ == "__main__":
    main(sys.argv[1:])
