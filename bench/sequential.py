"""Is a sequential sweep's stop valid, and what does it save? (``runner.sequential=true``)

    .venv/bin/python bench/sequential.py                   # ECTSum val, 2,000 sequences each
    .venv/bin/python bench/sequential.py --sequences 1000 --batch 20

The paired differences come from real records: ROUGE-2 F1 of two extractive summaries of
every ECTSum val call against its reference (the first sentences up to 50 words, and the
first sentences that state a number up to 50 words), scored by the harness's own ROUGE
scorer settings (rouge-score, stemmed). No model is called.

* **Null**: each sequence puts the tasks in a random order and flips the sign of each
  difference with a fair coin, so the true mean difference is 0 while the spread is the
  records'. A look after every ``--batch`` tasks (``metrics.sequential.first_settled``,
  alpha 0.05, one comparison). A decision is a false decision. Beside it, the same looks
  with a fixed-sample test (paired t-test, p < 0.05) re-run after every batch: what the
  sequential rule exists to avoid. A second null fills the whole range: each system scores
  a fair coin (0 or 1) per task, so differences are -1, 0 or 1.
* **Planted effects**: a null sequence plus a constant ``delta`` on every task (the
  differences stay within [-1, 1]); for each size, the share of sequences decided the right
  way before the tasks run out, the mean tasks at the stop and the spend saved against the
  full sweep.
* **By spread**: the same planted sizes on differences of three spreads (the records',
  four times the records', and a 0/1 score per system): tasks to a decision depend on the
  variance of the differences as much as on their mean.
* **Fixed n**: the verdict's fixed-sample rule's minimum detectable difference over the
  same number of tasks (``metrics.stats.min_detectable_difference``, 80% power).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metrics.sequential import DEFAULT_MARGIN_SHARE, State, first_settled  # noqa: E402
from metrics.stats import min_detectable_difference  # noqa: E402

VAL = ROOT / "data" / "datasets" / "ectsum" / "data" / "final" / "val"
if not VAL.is_dir():  # the development copy beside the project
    VAL = ROOT.parent / "shared" / "datasets" / "ectsum" / "data" / "final" / "val"
DELTAS = (0.01, 0.03, 0.05, 0.1, 0.2)
WORDS = 50
# per-task price of the pair naive + A-RAG with Claude Sonnet (the figures, from a
# public A-RAG project): what a task of the sweep costs when both systems answer it
PAIR_COST_USD = 0.037 + 0.098
NUMBER = re.compile(r"\d")


def first_words(sentences: list[str]) -> str:
    """Sentences in order until ``WORDS`` words (the last one cut)."""
    return " ".join(" ".join(sentences).split()[:WORDS])


def ectsum_val_differences() -> np.ndarray:
    """Per call: ROUGE-2 F1 of the lead summary minus that of the numbers-first summary."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    differences = []
    for transcript in sorted((VAL / "ects").glob("*.txt")):
        sentences = [s for s in transcript.read_text().splitlines() if s.strip()]
        reference = (VAL / "gt_summaries" / transcript.name).read_text()
        lead = first_words(sentences)
        numbers = first_words([s for s in sentences if NUMBER.search(s)])
        differences.append(scorer.score(reference, lead)["rouge2"].fmeasure
                           - scorer.score(reference, numbers)["rouge2"].fmeasure)
    return np.array(differences)


def null_sequences(differences: np.ndarray, sequences: int, seed: int) -> np.ndarray:
    """``sequences`` rows: the tasks in a random order, each difference's sign a fair coin."""
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((sequences, len(differences))), axis=1)
    signs = rng.choice([-1.0, 1.0], size=order.shape)
    return differences[order] * signs


def peeking_t_test_decides(rows: np.ndarray, batch: int) -> np.ndarray:
    """Per row: whether a fixed-sample paired t-test re-run after every batch ever reached
    p < 0.05 (what stopping on "significant" does)."""
    looks = np.arange(batch, rows.shape[1] + 1, batch)
    sums, squares = np.cumsum(rows, axis=1), np.cumsum(rows**2, axis=1)
    mean = sums[:, looks - 1] / looks
    var = (squares[:, looks - 1] - looks * mean**2) / (looks - 1)
    t = mean / np.sqrt(var / looks)
    return (2 * scipy_stats.t.sf(np.abs(t), looks - 1) < 0.05).any(axis=1)


def simulate(rows: np.ndarray, delta: float, batch: int) -> tuple[float, float, float]:
    """(share decided the right way, share decided the wrong way, mean tasks at the stop)
    with ``delta`` added to every difference; under the null every decision is wrong."""
    right = wrong = 0
    stops = []
    for row in rows + delta:
        done, state = first_settled(row, 1.0, DEFAULT_MARGIN_SHARE, batch)
        stops.append(done)
        if state == State.decided:
            right_way = delta > 0 and float(np.mean(row[:done])) > 0
            right, wrong = right + right_way, wrong + (not right_way)
    return right / len(rows), wrong / len(rows), float(np.mean(stops))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    differences = ectsum_val_differences()
    n, spread = len(differences), float(np.mean(np.abs(differences)))
    print(f"ECTSum val: {n} calls, ROUGE-2 lead minus numbers-first: mean "
          f"{differences.mean():+.4f}, mean |difference| {spread:.4f}, SD {differences.std():.4f}")

    rows = null_sequences(differences, args.sequences, seed=0)
    peeked = float(peeking_t_test_decides(rows, args.batch).mean())
    _, false_rate, null_stop = simulate(rows, 0.0, args.batch)
    print(f"\nnull ({args.sequences} sequences, a look every {args.batch} tasks): "
          f"false decisions {false_rate:.4f} (sequential), {peeked:.4f} (t-test at every look); "
          f"mean tasks at the stop {null_stop:.0f} of {n}")

    coins = np.random.default_rng(1).binomial(1, 0.5, size=(2, args.sequences, n)).astype(float)
    coin_rows = coins[0] - coins[1]
    _, coin_false, _ = simulate(coin_rows, 0.0, args.batch)
    print(f"null, a fair coin per task and system: false decisions {coin_false:.4f} "
          f"(sequential), {float(peeking_t_test_decides(coin_rows, args.batch).mean()):.4f} "
          "(t-test at every look)")

    fixed = min_detectable_difference(differences)
    print(f"fixed-n rule over {n} tasks: minimum detectable difference "
          f"{fixed.value if fixed.value is None else f'{fixed.value:.4f}'} (80% power)")
    print("\n| true mean difference | decided (right way) | wrong way | mean tasks at stop "
          "| spend saved |")
    print("|---|---|---|---|---|")
    for delta in DELTAS:
        right, wrong, stop = simulate(rows, delta, args.batch)
        saved = (n - stop) * PAIR_COST_USD
        print(f"| {delta:.2f} | {right:.3f} | {wrong:.3f} "
              f"| {stop:.0f} of {n} | {1 - stop / n:.0%} (${saved:.2f} of "
              f"${n * PAIR_COST_USD:.2f}) |")
    by_variance(differences, args.sequences, args.batch)
    print(f"\n{time.perf_counter() - started:.0f} s")


def coin_rows(delta: float, sequences: int, n: int, seed: int) -> np.ndarray:
    """Differences of two systems that each score 0 or 1 per task, the first with
    probability 0.5 + delta/2, the second 0.5 - delta/2: mean delta, SD about 0.71."""
    rng = np.random.default_rng(seed)
    first = rng.binomial(1, 0.5 + delta / 2, size=(sequences, n))
    return (first - rng.binomial(1, 0.5 - delta / 2, size=(sequences, n))).astype(float)


def by_variance(differences: np.ndarray, sequences: int, batch: int) -> None:
    """Tasks to a decision by true difference *and* the differences' spread: the records'
    ROUGE-2 differences, the same four times as spread (clipped to stay in range), and a
    0/1 score per system (the widest a [0, 1] metric's differences can be spread)."""
    n = len(differences)
    base = null_sequences(differences, sequences, seed=2)
    wide = np.clip(null_sequences(4 * differences, sequences, seed=3), -0.8, 0.8)
    # each case: the rows before ``simulate`` adds delta (a 0/1 pair's mean is planted in
    # its probabilities, so delta is taken off again)
    cases = [("ROUGE-2 records", lambda d: base), ("ROUGE-2 x 4", lambda d: wide),
             ("0/1 per system", lambda d: coin_rows(d, sequences, n, seed=4) - d)]
    sds = [float(base.std()), float(wide.std()), float(coin_rows(0.0, sequences, n, 4).std())]
    print(f"\nby spread ({sequences} sequences each): decided the right way / mean tasks "
          "at the stop")
    print("| true mean difference | " + " | ".join(
        f"{name} (SD {sd:.2f})" for (name, _), sd in zip(cases, sds, strict=True)) + " |")
    print("|---|" + "---|" * len(cases))
    for delta in DELTAS:
        cells = []
        for _, rows_of in cases:
            right, _, stop = simulate(rows_of(delta), delta, batch)
            cells.append(f"{right:.2f} / {stop:.0f}")
        print(f"| {delta:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
