"""Benchmark: retrieval only (no generation), every retrieval.method × neighbours × contextual
headers, on FinanceBench QA (gold: evidence pages) and ECTSum val (gold: key sentences).

    .venv/bin/python bench/retrieval.py --limit 20                 # quick check
    .venv/bin/python bench/retrieval.py                            # ECTSum val, FinanceBench 12 q.
    .venv/bin/python bench/retrieval.py --tokenizers               # + BM25 tokenizer variants
    .venv/bin/python bench/retrieval.py --min-score 0.3 --parent-chunk-size 480 \
        --reranker-path /models/ms-marco-MiniLM-L-6-v2             # + the retrieval options

Each task's question is ranked as the naive system ranks it (``arag.systems.retriever``:
``rank_chunks`` 10 deep, then ±N neighbours within the same 10-chunk depth), under
``retrieval.scope=document``, and scored with the harness's own ranking metrics
(``metrics.ranking``, per gold span): Recall@5, Recall@10, MRR@10, nDCG@10. queries/s is the
search alone (query embedding and/or BM25 scoring, fusion, neighbours), measured in this
process. Indexes come from ``load_or_build_index`` under ``--cache-dir`` (default
``data/cache``, shared with runs), so the dense index is embedded once per corpus and header
choice; ``--tokenizers`` adds BM25 rows for each tokenizer variant (stemming, stopwords).
``--min-score``, ``--parent-chunk-size`` and ``--reranker-path`` add dense rows with
``retrieval.min_score``, small-to-big (``retrieval.parent_chunk_size``) and a local
cross-encoder reranking the first 20 candidates (``retrieval.rerank=cross_encoder``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402

import runners.config  # noqa: E402,F401  (registers the schema)
from arag.datasets import load_dataset  # noqa: E402
from arag.records import Prediction, Task  # noqa: E402
from arag.retrieval import (  # noqa: E402
    Bm25Index,
    Method,
    SearchIndex,
    Tokenizer,
    load_or_build_index,
    rank_chunks,
    with_neighbors,
)
from arag.retrieval.cross_encoder import cross_rerank  # noqa: E402
from arag.retrieval.index import Hit  # noqa: E402
from arag.retrieval.search import with_parents  # noqa: E402
from metrics.base import ScoringItem  # noqa: E402
from metrics.ranking import RankingScorer  # noqa: E402
from runners.evaluate import gold_chunk_ids, paged_gold_documents  # noqa: E402

DEPTH = 10
RERANK_CANDIDATES = 20  # retrieval.rerank_candidates
FIELDS = ("recall_at_5", "recall_at_10", "mrr_at_10", "ndcg_at_10")
DATASETS = {"ectsum": ["dataset=ectsum", "dataset.split=val"],
            "financebench": ["dataset=financebench"]}


@dataclass
class Row:
    dataset: str
    method: str
    neighbors: int
    headers: bool
    n: int
    scores: dict[str, float]
    qps: float


def load(name: str, cache_dir: Path, limit: int | None):
    overrides = [*DATASETS[name], f"cache.dir={cache_dir}"]
    if limit:
        overrides.append(f"dataset.limit={limit}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    ds = load_dataset(cfg.dataset, ROOT)
    return cfg, ds, [t for t in ds.tasks if t.gold_lines]


def ranked(index: SearchIndex, task: Task, search, neighbors: int) -> list[str]:
    hits = [h.chunk_id for h in search(task.question, DEPTH, list(task.doc_ids))]
    return with_neighbors(index, hits, neighbors, DEPTH) if neighbors else hits


def score(tasks: list[Task], rankings: list[list[str]], index: SearchIndex, corpus
          ) -> tuple[int, dict[str, float]]:
    scorer = RankingScorer([5, 10])
    by_doc: dict[str, list] = {}
    for c in index.chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    values: dict[str, list[float]] = {f: [] for f in FIELDS}
    for task, ranking in zip(tasks, rankings, strict=True):
        pred = Prediction(id=task.id, source="bench", system="bench", model="none",
                          task_type=task.task_type, question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth="", predicted="-")
        item = ScoringItem(pred, task, gold_chunk_ids(task, by_doc), "", 50, True,
                           paged_gold_documents(task, corpus), ranking)
        s = scorer.score_one(item)
        for f in FIELDS:
            if s.values.get(f) is not None:
                values[f].append(s.values[f])
    n = len(values["recall_at_5"])
    return n, {f: sum(v) / len(v) if v else float("nan") for f, v in values.items()}


def run_variant(name: str, index: SearchIndex, tasks: list[Task], corpus, label: str,
                search, neighbors: int, headers: bool) -> Row:
    ranked(index, tasks[0], search, neighbors)  # warm-up: model load, BM25 build, not timed
    started = time.perf_counter()
    rankings = [ranked(index, t, search, neighbors) for t in tasks]
    qps = len(tasks) / (time.perf_counter() - started)
    n, scores = score(tasks, rankings, index, corpus)
    return Row(name, label, neighbors, headers, n, scores, qps)


def bench_dataset(name: str, args) -> list[Row]:
    cfg, ds, tasks = load(name, args.cache_dir, args.limit or (args.fb_limit if name ==
                                                                "financebench" else None))
    print(f"{name}: {len(tasks)} tasks with gold, {len(ds.corpus.documents)} documents",
          file=sys.stderr, flush=True)
    rows: list[Row] = []
    for headers in (False, True):
        cfg.retrieval.contextual_headers = headers
        index = load_or_build_index(ds.corpus, cfg.retrieval, args.cache_dir)
        for method in ("dense", "bm25", "hybrid"):
            m = Method(method, args.fusion_k, args.dense_weight)

            def search(q, k, docs, m=m, index=index):
                return rank_chunks(index, q, k, docs, m)

            for neighbors in (0, 1):
                rows.append(run_variant(name, index, tasks, ds.corpus, method, search,
                                        neighbors, headers))
                print(fmt_row(rows[-1]), file=sys.stderr, flush=True)
        if args.tokenizers and not headers:
            rows += tokenizer_rows(name, index, tasks, ds.corpus)
        if not headers:
            rows += option_rows(name, index, tasks, ds.corpus, args)
    return rows


def option_rows(name: str, index: SearchIndex, tasks: list[Task], corpus, args) -> list[Row]:
    """Dense retrieval with each retrieval option the command line gives."""
    dense = Method("dense")
    variants = []
    if args.min_score is not None:
        strict = Method("dense", min_score=args.min_score)
        variants.append((f"dense min_score={args.min_score:g}",
                         lambda q, k, docs: rank_chunks(index, q, k, docs, strict)))
    if args.parent_chunk_size:
        size = args.parent_chunk_size
        variants.append((f"dense small-to-big {size}", lambda q, k, docs: [
            Hit(c, 0.0, "") for c in with_parents(
                index, [h.chunk_id for h in rank_chunks(index, q, k, docs, dense)], size, k)]))
    if args.reranker_path:
        path = args.reranker_path

        def reranked(q, k, docs):
            pool = rank_chunks(index, q, max(k, RERANK_CANDIDATES), docs, dense)
            return cross_rerank(path, q, pool[:RERANK_CANDIDATES], index)[:k]

        variants.append(("dense + cross-encoder", reranked))
    rows = []
    for label, search in variants:
        rows.append(run_variant(name, index, tasks, corpus, label, search, 0, False))
        print(fmt_row(rows[-1]), file=sys.stderr, flush=True)
    return rows


def tokenizer_rows(name: str, index: SearchIndex, tasks: list[Task], corpus) -> list[Row]:
    rows = []
    for stem, stop in ((True, True), (True, False), (False, True), (False, False)):
        bm25 = Bm25Index(index.chunks, [c.body for c in index.chunks], Tokenizer(stem, stop))

        def search(q, k, docs, bm25=bm25):
            return [Hit(index.chunks[p].chunk_id, s, "") for p, s in bm25.search(q, k, docs)]

        label = f"bm25 stem={'y' if stem else 'n'} stop={'y' if stop else 'n'}"
        rows.append(run_variant(name, index, tasks, corpus, label, search, 0, False))
        print(fmt_row(rows[-1]), file=sys.stderr, flush=True)
    return rows


def fmt_row(r: Row) -> str:
    cells = [r.dataset, r.method, str(r.neighbors), "yes" if r.headers else "no", str(r.n),
             *(f"{r.scores[f]:.3f}" for f in FIELDS), f"{r.qps:.1f}"]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="ectsum,financebench")
    parser.add_argument("--limit", type=int, default=None, help="dataset.limit for every dataset")
    parser.add_argument("--fb-limit", type=int, default=12,
                        help="FinanceBench questions when --limit is not given (each filing "
                             "is a few thousand sentences to embed)")
    parser.add_argument("--cache-dir", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--fusion-k", type=int, default=60)
    parser.add_argument("--dense-weight", type=float, default=0.5)
    parser.add_argument("--tokenizers", action="store_true",
                        help="also compare BM25 tokenizers (stemming, stopwords)")
    parser.add_argument("--min-score", type=float, default=None,
                        help="add a dense row with retrieval.min_score")
    parser.add_argument("--parent-chunk-size", type=int, default=None,
                        help="add a dense small-to-big row (retrieval.parent_chunk_size)")
    parser.add_argument("--reranker-path", default=None,
                        help="add a dense row reranked by this local CrossEncoder folder")
    args = parser.parse_args(argv)
    args.cache_dir = args.cache_dir.resolve()
    rows = [r for name in args.datasets.split(",") for r in bench_dataset(name, args)]
    print(f"retrieval bench: depth {DEPTH}, scope=document, fusion_k={args.fusion_k}, "
          f"dense_weight={args.dense_weight}")
    print("| dataset | method | neighbours | headers | tasks | Recall@5 | Recall@10 | MRR@10 "
          "| nDCG@10 | queries/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(fmt_row(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
