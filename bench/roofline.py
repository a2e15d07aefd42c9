"""The fp32 roofline of sentence embedding on this machine, measured, not assumed.

``matmul_gflops`` times a large fp32 matrix multiply (torch, all threads): the rate the
embedder's matrix multiplies could reach at best. ``encoder_flops`` counts a BERT-style
encoder's forward FLOPs for one text of n tokens (projections, attention, feed-forward; a
multiply-add is 2 FLOPs; embeddings, norms and pooling are negligible). Together they
give the roofline sentences/s of a set of sentences: GFLOPS / mean FLOPs per sentence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class EncoderShape:
    layers: int
    hidden: int
    intermediate: int

    @classmethod
    def of(cls, model_path: str) -> EncoderShape:
        from transformers import AutoConfig

        c = AutoConfig.from_pretrained(model_path)
        return cls(c.num_hidden_layers, c.hidden_size, c.intermediate_size)


def encoder_flops(tokens: int, shape: EncoderShape) -> float:
    h, n = shape.hidden, tokens
    per_layer = (4 * 2 * n * h * h              # Q, K, V and output projections
                 + 2 * 2 * n * n * h            # scores QK^T and the weighted sum of V
                 + 2 * 2 * n * h * shape.intermediate)  # feed-forward up and down
    return float(shape.layers * per_layer)


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Best fp32 GFLOPS of an n x n x n matrix multiply over ``repeats`` tries."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * n ** 3 / best / 1e9


def roofline_sentences_per_s(token_counts: list[int], shape: EncoderShape, gflops: float) -> float:
    """Sentences/s if every FLOP of the forward passes (no padding) ran at ``gflops``."""
    flops = sum(encoder_flops(n, shape) for n in token_counts) / max(1, len(token_counts))
    return gflops * 1e9 / flops
