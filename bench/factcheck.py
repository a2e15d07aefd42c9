"""Balanced accuracy of each no-LLM faithfulness signal against SummEdits' human labels,
per domain and split: numeric precision alone, each check of ``metrics.factcheck``, and
the whole check. A signal says "consistent" when it finds nothing unsupported.

    .venv/bin/python bench/factcheck.py [--root DIR] [--domains ectsum sales_call news]

Tune only on the evaluation splits and the non-ectsum domains; the ectsum test split (an
upstream clone) is for reporting.
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
from metrics.numeric import quantities, share_found  # noqa: E402


def decisions(item: dict) -> dict[str, int]:
    summary, doc = item["summary"], item["doc"]
    precision = share_found(quantities(summary), quantities(doc))
    out = {"numeric_precision": int(precision is None or precision == 1.0)}
    for kind in CHECKS:
        out[kind] = int(all(s.supported for s in statements(summary, doc, (kind,))))
    out["factcheck"] = int(all(s.supported for s in statements(summary, doc)))
    return out


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
            chosen = [i for i in items if i["split"] == split]
            labels = [i["label"] for i in chosen]
            rows = [decisions(i) for i in chosen]
            cells = "  ".join(f"{k} {balanced_accuracy_score(labels, [r[k] for r in rows]):.3f}"
                              for k in rows[0])
            print(f"{domain:>10} {split:<10} n={len(chosen):<4} {cells}")


if __name__ == "__main__":
    main()
