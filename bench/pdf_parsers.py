"""Benchmark: pypdf against pypdfium2 (PDFium) on FinanceBench's 10-Ks, speed and fidelity.

    .venv/bin/python bench/pdf_parsers.py --pypdf 3              # time pypdf on the first 3
    .venv/bin/python bench/pdf_parsers.py --pypdf 3 --pypdf-cache /tmp/old_cache/parsed

The filings are those ``dataset=financebench_qfs`` reads (every 10-K whose PDF is present).
PDFium parses every one of them; pypdf (pure Python, minutes a filing on a loaded machine)
parses only the first ``--pypdf N``, plus any filing whose pypdf text is already in a parse
cache given with ``--pypdf-cache`` (entries written by ``parser: pypdf ...`` whose sha256 is
the PDF's; their recorded parse time is not counted). Per parser: pages, words per page,
seconds, and fidelity against FinanceBench's own quotes: for every evidence item of a
question on one of these filings, the share of the quote's word 3-grams found on the
evidence page (after ``clean_page``, lower-cased, punctuation dropped); a quote *matches*
when at least 90% of its 3-grams are there. Fidelity is compared on the same evidence items
(those whose filing both parsers read).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arag.datasets.financebench import (  # noqa: E402
    DOC_INFO,
    PDFS,
    QUESTIONS,
    clean_page,
    extract_pages,
    read_doc_info,
)
from arag.files import sha256_file  # noqa: E402

MATCH = 0.9  # share of a quote's 3-grams that must be on its page


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", clean_page(text).lower()).split()


def trigrams(tokens: list[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)}


def quote_recall(quote: str, page: str) -> float | None:
    grams = trigrams(words(quote))
    return len(grams & trigrams(words(page))) / len(grams) if grams else None


def cached_pypdf(dirs: list[Path]) -> dict[str, list[str]]:
    """sha256 -> pages, from parse caches written by pypdf."""
    found: dict[str, list[str]] = {}
    for folder in dirs:
        for file in folder.glob("*.json"):
            data = json.loads(file.read_text(encoding="utf-8"))
            if str(data.get("parser", "")).startswith("pypdf "):
                found[data["sha256"]] = data["pages"]
    return found


def parse_all(pdfs: list[Path], n_pypdf: int, cache: dict[str, list[str]]
              ) -> dict[str, dict[str, Any]]:
    """doc_name -> {parser: {"pages", "seconds" (None when read from a cache)}}."""
    out: dict[str, dict[str, Any]] = {}
    for i, pdf in enumerate(pdfs):
        out[pdf.stem] = {}
        pages, seconds = extract_pages(pdf, "pdfium")
        out[pdf.stem]["pdfium"] = {"pages": pages, "seconds": seconds}
        sha = sha256_file(pdf)
        if i < n_pypdf:
            pages, seconds = extract_pages(pdf, "pypdf")
            out[pdf.stem]["pypdf"] = {"pages": pages, "seconds": seconds}
        elif sha in cache:
            out[pdf.stem]["pypdf"] = {"pages": cache[sha], "seconds": None}
        print(f"{pdf.stem}: " + ", ".join(f"{k} {len(v['pages'])} pages"
                                          + (f" {v['seconds']:.1f}s" if v["seconds"] else "")
                                          for k, v in out[pdf.stem].items()), flush=True)
    return out


def evidence_items(root: Path, docs: set[str]) -> list[dict[str, Any]]:
    items = []
    for line in (root / QUESTIONS).read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        for ev in q["evidence"]:
            if ev.get("doc_name", q["doc_name"]) in docs and ev.get("evidence_text"):
                items.append(ev | {"doc_name": ev.get("doc_name", q["doc_name"])})
    return items


def fidelity(parsed: dict[str, dict[str, Any]], items: list[dict[str, Any]], parser: str
             ) -> tuple[int, int, float]:
    """(quotes matched, quotes, mean 3-gram recall) of one parser over the given items."""
    recalls = []
    for ev in items:
        pages = parsed[ev["doc_name"]][parser]["pages"]
        page = ev["evidence_page_num"]
        recall = quote_recall(ev["evidence_text"], pages[page]) if page < len(pages) else 0.0
        if recall is not None:
            recalls.append(recall)
    matched = sum(1 for r in recalls if r >= MATCH)
    return matched, len(recalls), sum(recalls) / len(recalls) if recalls else float("nan")


def summary_row(parsed: dict[str, dict[str, Any]], docs: list[str], parser: str,
                items: list[dict[str, Any]]) -> str:
    runs = [parsed[d][parser] for d in docs]
    n_pages = sum(len(r["pages"]) for r in runs)
    n_words = sum(len(p.split()) for r in runs for p in r["pages"])
    timed = [r for r in runs if r["seconds"] is not None]
    seconds = sum(r["seconds"] for r in timed)
    timed_pages = sum(len(r["pages"]) for r in timed)
    matched, total, mean = fidelity(parsed, items, parser)
    speed = f"{seconds:.1f} s ({len(timed)} filings, {1000 * seconds / timed_pages:.0f} ms/page)" \
        if timed else "not timed (cache)"
    return (f"| {parser} | {len(docs)} | {n_pages} | {n_words / n_pages:.0f} | {speed} | "
            f"{matched}/{total} ({matched / total:.1%}) | {mean:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT / "data/datasets/financebench",
                    help="the FinanceBench clone (`make data` links it here)")
    ap.add_argument("--pypdf", type=int, default=2, help="filings to time pypdf on")
    ap.add_argument("--pypdf-cache", type=Path, action="append", default=[],
                    help="a parse cache folder (…/parsed) holding pypdf's text of more filings")
    ap.add_argument("--limit", type=int, default=None, help="first N 10-Ks only")
    args = ap.parse_args()
    info = read_doc_info(args.root / DOC_INFO)
    pdfs = [args.root / PDFS / f"{n}.pdf" for n in sorted(info)
            if str(info[n].get("doc_type", "")).lower().startswith("10k")
            and (args.root / PDFS / f"{n}.pdf").exists()][:args.limit]
    started = time.perf_counter()
    parsed = parse_all(pdfs, args.pypdf, cached_pypdf(args.pypdf_cache))
    print(f"\n{len(pdfs)} 10-Ks, {time.perf_counter() - started:.0f} s in all\n")
    both = [d for d in parsed if "pypdf" in parsed[d]]
    print("| parser | filings | pages | words/page | parse time | quotes matched | "
          "mean 3-gram recall |\n|---|---|---|---|---|---|---|")
    print(summary_row(parsed, list(parsed), "pdfium", evidence_items(args.root, set(parsed))))
    if both:
        items = evidence_items(args.root, set(both))
        unequal = [d for d in both if len(parsed[d]["pdfium"]["pages"])
                   != len(parsed[d]["pypdf"]["pages"])]
        print(summary_row(parsed, both, "pdfium", items))
        print(summary_row(parsed, both, "pypdf", items))
        print(f"\npage counts differ on {len(unequal)} of {len(both)} filings {unequal}")


if __name__ == "__main__":
    main()
