"""Which comparison tasks ``dataset=financebench_compare`` derives, over every 10-K.

    .venv/bin/python bench/compare_tasks.py                 # data/datasets/financebench
    .venv/bin/python bench/compare_tasks.py dataset.root=/data/financebench cache.dir=/tmp/c

Loads the dataset (no reference model: no API call) with any extra overrides, then prints
each company's filings, the pair chosen with both MD&As' pages and gold size, the pairs
passed over and why, the totals, and the load time (PDF parsing is cached under
``cache.dir``, shared with ``dataset=financebench`` and ``financebench_qfs``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timed_load import load_line, timed_load  # noqa: E402


def main(overrides: list[str]) -> None:
    cfg, dataset, seconds = timed_load("financebench_compare", overrides)
    tasks = {t.meta["company"]: t for t in dataset.tasks}
    report = dataset.reports["comparisons"]
    for company, entry in report["companies"].items():
        task = tasks.get(company)
        if task is not None:
            pages = ", ".join(f"{doc} p.{a}-{b} ({len(task.gold_lines[doc])} lines)"
                              for doc, (a, b) in task.meta["pages_by_doc"].items())
            print(f"{company:22s} FY{task.meta['fiscal_years'][0]} vs "
                  f"FY{task.meta['fiscal_years'][1]}: {pages}")
        for passed in entry["passed_over"]:
            print(f"{'':22s} passed over {' vs '.join(passed['pair'])}: {passed['why']}")
    print(f"\n{report['n_companies_with_two_years']} companies with 10-Ks of two fiscal years: "
          f"{report['n_tasks']} comparison tasks; without a task: "
          f"{', '.join(report['companies_without_task']) or 'none'}")
    print(load_line(dataset, seconds))


if __name__ == "__main__":
    main(sys.argv[1:])
