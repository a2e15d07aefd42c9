"""Balanced accuracy of each no-LLM faithfulness signal against SummEdits' human labels,
per domain and split: numeric precision alone, each check of ``metrics.factcheck``, and
the whole check with its bootstrap 95% CI. A signal says "consistent" when it finds
nothing unsupported.

    .venv/bin/python bench/factcheck.py [--root DIR] [--domains ectsum sales_call news]

The rules were tuned on the evaluation split of every domain (marked "tuned on"); the
sales_call and news test splits are held out and only reported. The ectsum test split is
not in ``../shared``: it is measured outside the project, never looked for here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.metrics import balanced_accuracy_score  # noqa: E402

from metrics.factcheck import CHECKS, statements  # noqa: E402
from metrics.meta_eval import balanced_accuracy_ci  # noqa: E402
from metrics.numeric import quantities, share_found  # noqa: E402

TUNED_ON = "evaluation"


def decisions(item: dict) -> dict[str, int]:
    summary, doc = item["summary"], item["doc"]
    precision = share_found(quantities(summary), quantities(doc))
    out = {"numeric_precision": int(precision is None or precision == 1.0)}
    found = statements(summary, doc)
    for kind in CHECKS:
        out[kind] = int(all(s.supported for s in found if s.kind == kind))
    out["factcheck"] = int(all(s.supported for s in found))
    return out


def split_line(domain: str, split: str, items: list[dict]) -> str:
    labels = [i["label"] for i in items]
    rows = [decisions(i) for i in items]
    cells = "  ".join(f"{k} {balanced_accuracy_score(labels, [r[k] for r in rows]):.3f}"
                      for k in rows[0])
    ci = balanced_accuracy_ci(labels, [r["factcheck"] for r in rows])
    ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    mark = "tuned on" if split == TUNED_ON else "held out"
    return f"{domain:>10} {split:<10} {mark:<8} n={len(items):<4} {cells}{ci_text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="../shared/datasets/summedits")
    parser.add_argument("--domains", nargs="+", default=["ectsum", "sales_call", "news"])
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    for domain in args.domains:
        items = json.loads((Path(args.root) / "data" / "summedits" /
                            f"summedits_{domain}.json").read_text(encoding="utf-8"))
        for split in sorted({i["split"] for i in items}):
            print(split_line(domain, split, [i for i in items if i["split"] == split]))


if __name__ == "__main__":
    main()
