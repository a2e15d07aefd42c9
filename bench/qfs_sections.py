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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timed_load import load_line, timed_load  # noqa: E402


def main(overrides: list[str]) -> None:
    cfg, dataset, seconds = timed_load("financebench_qfs", overrides)
    report = dataset.reports["sections"]
    cut = 0
    for name, sections in report["filings"].items():
        cells = []
        for key, found in sections.items():
            cells.append(f"{key}={tuple(found['pages']) if found['pages'] else None}"
                         + (f" ({found['note']})" if found["note"] else ""))
            cut += "cut at page" in found["note"]
        print(f"{name:36s} " + " | ".join(cells))
    n_sections = 2 * report["n_filings"]
    print(f"\n{report['n_filings']} 10-Ks, {n_sections} sections: {report['n_tasks']} tasks, "
          f"{report['n_sections_not_found']} not found, {cut} cut at "
          f"dataset.options.max_section_pages={cfg.dataset.options.max_section_pages}")
    print(load_line(dataset, seconds))


if __name__ == "__main__":
    main(sys.argv[1:])
