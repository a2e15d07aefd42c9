"""Benchmark: sentence embedding throughput, fp32 vs bf16 rankings, BERTScore time.

    .venv/bin/python bench/embedding.py throughput            # old vs token batches, roofline
    .venv/bin/python bench/embedding.py ranking               # naive retriever, fp32 vs bf16
    .venv/bin/python bench/embedding.py bertscore             # time per 100 tasks

``throughput``: the same distinct ECTSum val sentences (``--sentences``) embedded by the
previous path (sentence-transformers' ``encode``, batches of 64 sorted by characters and
padded), by token batches at fp32 and at bf16, interleaved, best of ``--rounds``; an fp32
matrix multiply measured in the same run gives the roofline sentences/s
(``bench/roofline.py``). It prints how far each path's vectors are from the previous
path's, whether the fp32 vectors are bit-identical when the sentences come in another
order and batch size, and how many top-5 neighbours bf16 keeps.

``ranking``: Recall@5/10, MRR@10 and nDCG@10 of the naive dense retriever (the question ->
``semantic_search`` over the task's documents, depth 10), scored by ``metrics/ranking.py``
on ECTSum val (gold key sentences) and FinanceBench (evidence pages), at fp32 and bf16.
No generation. Indexes and vectors go through ``--cache`` (default ``data/cache``).

``bertscore``: ``--tasks`` ECTSum val references against two candidate systems (the
extractive summary and the lead ~50 words of each transcript): the previous scorer (a new
``BERTScorer`` per job, ``score(cands, refs)``) vs ``metrics.bertscore`` (one model per
process, references embedded once), seconds per 100 tasks, and the largest F1 difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from roofline import EncoderShape, matmul_gflops, roofline_sentences_per_s  # noqa: E402

RANKING_FIELDS = ("recall_at_5", "recall_at_10", "mrr_at_10", "ndcg_at_10")
TOLERANCE = 0.005


def compose(*overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    import runners.config  # noqa: F401  (registers the schema)

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def load(*overrides: str):
    from arag.datasets import load_dataset

    cfg = compose(*overrides)
    return cfg, load_dataset(cfg.dataset, ROOT)


def ectsum_sentences(n: int) -> list[str]:
    _, ds = load("dataset=ectsum", "dataset.split=val")
    distinct = dict.fromkeys(line for d in ds.corpus.documents.values() for line in d.lines)
    return list(distinct)[:n]


def previous_path(embedder, texts: list[str]) -> np.ndarray:
    """What Embedder.encode did before token batches: one padded encode, 64 a batch."""
    return np.asarray(embedder._model.encode(texts, batch_size=64, normalize_embeddings=True,
                                             show_progress_bar=False), dtype="float32")


def top5_kept(a: np.ndarray, b: np.ndarray, n_queries: int = 500) -> float:
    """Share of the top-5 neighbours (by a) of the first n vectors that b keeps."""
    q = slice(0, min(n_queries, len(a)))
    top_a = np.argsort(-(a[q] @ a.T), axis=1)[:, 1:6]
    top_b = np.argsort(-(b[q] @ b.T), axis=1)[:, 1:6]
    return float(np.mean([len(set(x) & set(y)) / 5 for x, y in zip(top_a, top_b, strict=True)]))


def throughput(args: argparse.Namespace) -> None:
    from arag.retrieval.embedder import Embedder, cpu_has_bf16, resolve_embedder_path

    texts = ectsum_sentences(args.sentences)
    fp32 = Embedder(resolve_embedder_path(None), precision="fp32")
    paths: dict[str, Any] = {"previous (chars, padded)": lambda: previous_path(fp32, texts),
                             "token batches fp32": lambda: fp32.encode(texts)}
    if cpu_has_bf16():
        bf16 = Embedder(fp32.path, precision="bf16")
        paths["token batches bf16"] = lambda: bf16.encode(texts)
    tokens = fp32.token_lengths(texts)
    gflops = matmul_gflops()
    best: dict[str, float] = {}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):  # interleaved: each round runs every path once
        for name, run in paths.items():
            started = time.perf_counter()
            vectors[name] = run()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
    gflops = max(gflops, matmul_gflops())
    roof = roofline_sentences_per_s(tokens, EncoderShape.of(fp32.path), gflops)
    print(f"{len(texts)} distinct ECTSum val sentences, {statistics.mean(tokens):.1f} tokens on "
          f"average; best of {args.rounds} interleaved rounds")
    print(f"fp32 matmul: {gflops:.0f} GFLOPS -> roofline {roof:.0f} sentences/s (no padding)")
    base = best["previous (chars, padded)"]
    old = vectors["previous (chars, padded)"]
    for name, seconds in best.items():
        rate = len(texts) / seconds
        v = vectors[name]
        print(f"  {name:<26} {seconds:7.2f} s {rate:7.1f} sentences/s  {base / seconds:5.2f}x  "
              f"{100 * rate / roof:5.1f}% of roofline  max|d| vs previous "
              f"{np.abs(v - old).max():.2e}, min cos {(v * old).sum(1).min():.7f}")
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = Embedder(fp32.path, batch_size=16).encode([texts[i] for i in order])
    print("fp32 token batches bit-identical in another order and batch size: "
          f"{np.array_equal(shuffled, vectors['token batches fp32'][order])}")
    if "token batches bf16" in vectors:
        a, b = vectors["token batches fp32"], vectors["token batches bf16"]
        print(f"bf16 vs fp32: min cos {(a * b).sum(1).min():.6f}, top-5 neighbours kept "
              f"{100 * top5_kept(a, b):.1f}%")


def ranking_means(overrides: list[str], precision: str, cache: Path) -> dict[str, float]:
    from arag.records import Prediction
    from arag.retrieval import load_or_build_index
    from metrics.base import ScoringItem
    from metrics.ranking import RankingScorer
    from runners.evaluate import gold_chunk_ids, paged_gold_documents

    cfg, ds = load(*overrides, f"retrieval.embedder.precision={precision}", f"cache.dir={cache}")
    index = load_or_build_index(ds.corpus, cfg.retrieval, cache, cfg.cache.mode)
    by_doc: dict[str, list] = {}
    for c in index.chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    scorer = RankingScorer((5, 10))
    sums: dict[str, list[float]] = {f: [] for f in RANKING_FIELDS}
    for task in ds.tasks:
        hits = index.semantic_search(task.question, 10, list(task.doc_ids))
        pred = Prediction(id=task.id, source="bench", system="naive", model="-",
                          task_type=task.task_type, question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth=task.reference)
        item = ScoringItem(pred, task, gold_chunk_ids(task, by_doc), "", 0, True,
                           paged_gold_documents(task, ds.corpus),
                           list(dict.fromkeys(h.chunk_id for h in hits)))
        for f, v in scorer.score_one(item).values.items():
            if f in sums and v is not None:
                sums[f].append(v)
    print(f"  {precision}: {len(ds.tasks)} tasks, index {index.n_vectors} sentences "
          f"({index.stats.sentences_embedded} embedded now)", flush=True)
    return {f: statistics.mean(v) for f, v in sums.items() if v}


def ranking(args: argparse.Namespace) -> None:
    datasets = {"ECTSum val": (["dataset=ectsum", "dataset.split=val"], args.ectsum_limit),
                "FinanceBench": (["dataset=financebench"], args.financebench_limit)}
    verdict = True
    for name, (overrides, limit) in datasets.items():
        if limit:
            overrides = [*overrides, f"dataset.limit={limit}"]
        print(f"{name} ({' '.join(overrides)}):", flush=True)
        fp32 = ranking_means(overrides, "fp32", args.cache)
        bf16 = ranking_means(overrides, "bf16", args.cache)
        for f in RANKING_FIELDS:
            delta = bf16[f] - fp32[f]
            verdict &= abs(delta) <= TOLERANCE
            print(f"    {f:<13} fp32 {fp32[f]:.4f}  bf16 {bf16[f]:.4f}  delta {delta:+.4f}")
    print(f"every ranking metric within ±{TOLERANCE}: {'yes' if verdict else 'no'}")


def bertscore(args: argparse.Namespace) -> None:
    from bert_score import BERTScorer

    from arag.llm.extractive import summarize
    from arag.retrieval import packaged_minilm_path
    from metrics.bertscore import BertScoreModel

    _, ds = load("dataset=ectsum", "dataset.split=val", f"dataset.limit={args.tasks}")
    refs = [t.reference for t in ds.tasks]
    docs = [ds.corpus.documents[t.doc_ids[0]].lines for t in ds.tasks]
    systems = {"extractive": [summarize(list(d), t.question, 50, "earnings_call")
                              for d, t in zip(docs, ds.tasks, strict=True)],
               "lead": [" ".join(" ".join(d).split()[:50]) for d in docs]}
    path, per100 = packaged_minilm_path(), 100 / len(refs)
    print(f"{len(refs)} ECTSum val tasks, two systems; seconds per 100 tasks")
    started = time.perf_counter()
    plain_f1 = {}
    for name, cands in systems.items():  # the previous scorer: one BERTScorer per job
        t = time.perf_counter()
        plain_f1[name] = BERTScorer(model_type=path, num_layers=6, device="cpu").score(
            cands, refs)[2].tolist()
        print(f"  previous, {name:<10} {(time.perf_counter() - t) * per100:6.2f} s (incl. load)")
    plain_total = time.perf_counter() - started
    started = time.perf_counter()
    model = BertScoreModel(path, 6)
    print(f"  new, model load     {(time.perf_counter() - started) * per100:6.2f} s (once)")
    worst = 0.0
    for name, cands in systems.items():
        t = time.perf_counter()
        f1 = model.score(cands, refs, 32)[2]
        worst = max(worst, max(abs(a - b) for a, b in zip(f1, plain_f1[name], strict=True)))
        print(f"  new, {name:<15} {(time.perf_counter() - t) * per100:6.2f} s")
    new_total = time.perf_counter() - started
    print(f"  both systems: previous {plain_total * per100:.2f} s, new {new_total * per100:.2f} s "
          f"({plain_total / new_total:.2f}x); largest |F1 difference| {worst:.1e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("throughput", "ranking", "bertscore"))
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ectsum-limit", type=int, default=None, help="ranking: dataset.limit")
    parser.add_argument("--financebench-limit", type=int, default=None,
                        help="ranking: dataset.limit (the first N answerable questions' PDFs)")
    parser.add_argument("--cache", type=Path, default=ROOT / "data" / "cache")
    parser.add_argument("--tasks", type=int, default=100, help="bertscore: tasks")
    args = parser.parse_args(argv)
    {"throughput": throughput, "ranking": ranking, "bertscore": bertscore}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
