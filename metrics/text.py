"""Reference-based text metrics: ROUGE (rouge-score) and BERTScore (bert-score).

``rougeL_f1`` is the LCS over the whole text; ``rougeLsum_f1`` is the summary-level LCS
over newline-split sentences (each reference bullet a sentence), which is what published
summarization numbers report (ECTSum's were computed so, with py-rouge).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from arag.config import positive
from arag.retrieval.embedder import resolve_embedder_path
from metrics.base import (
    Metric,
    PerTaskScorer,
    Scorer,
    ScorerEnv,
    Scores,
    ScoringItem,
    answered,
    missing_reference,
    register_scorer,
)
from metrics.bertscore import bertscore_model


@dataclass
class RougeOptions:
    use_stemmer: bool = True


@register_scorer("rouge")
class RougeScorer(PerTaskScorer):
    Options = RougeOptions
    metrics = [Metric("rouge1_f1", "ROUGE-1", bounds=(0.0, 1.0)),
               Metric("rouge2_f1", "ROUGE-2", report=True, compare_priority=3, bounds=(0.0, 1.0)),
               Metric("rougeL_f1", "ROUGE-L", bounds=(0.0, 1.0)),
               Metric("rougeLsum_f1", "ROUGE-Lsum", bounds=(0.0, 1.0))]
    reference_fields = ("rouge1_f1", "rouge2_f1", "rougeL_f1", "rougeLsum_f1")

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        return cls(options.use_stemmer)

    def __init__(self, use_stemmer: bool = True):
        self.use_stemmer = use_stemmer

    @cached_property
    def _scorer(self) -> Any:
        # built on first use: rouge_score imports NLTK (~2 s), which a dry run and a sweep's
        # checks (that only ask a scorer what it declares) never need
        from rouge_score import rouge_scorer

        return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
                                        use_stemmer=self.use_stemmer)

    def score_one(self, item: ScoringItem) -> Scores:
        r = self._scorer.score(item.task.reference, item.prediction.predicted)
        return Scores({"rouge1_f1": r["rouge1"].fmeasure, "rouge2_f1": r["rouge2"].fmeasure,
                       "rougeL_f1": r["rougeL"].fmeasure, "rougeLsum_f1": r["rougeLsum"].fmeasure})


@dataclass
class BertScoreOptions:
    # None: the packaged MiniLM (offline); online users may set roberta-large or FinBERT
    model_path: str | None = None
    num_layers: int = positive(6, "layers of the model whose embeddings are compared")
    batch_size: int = positive(32, "sentences per batch")


@register_scorer("bertscore")
class BertScoreScorer(Scorer):
    """BERTScore P/R/F1: the model is loaded once per process and the references are
    embedded once per sweep (metrics/bertscore.py)."""

    Options = BertScoreOptions
    metrics = [Metric("bertscore_p", "BERTScore P"), Metric("bertscore_r", "BERTScore R"),
               Metric("bertscore_f1", "BERTScore F1", report=True, compare_priority=4)]

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        return cls(options.model_path, options.num_layers, options.batch_size, env.device)

    def __init__(self, model_path: str | None, num_layers: int, batch_size: int = 32,
                 device: str = "auto"):
        self.model_path = resolve_embedder_path(model_path)
        self.num_layers = num_layers
        self.batch_size = batch_size
        self.device = device

    def provenance(self) -> dict[str, str]:
        return {"bertscore_model_path_used": str(self.model_path),
                "bertscore_num_layers_used": str(self.num_layers)}

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        todo = []
        for s, item in zip(out, items, strict=True):
            why = answered(item) or missing_reference(item)
            if why:
                s.null(self.fields, why)
            else:
                todo.append((s, item))
        if not todo:
            return out
        model = bertscore_model(self.model_path, self.num_layers, self.device)
        cands = [i.prediction.predicted or "" for _, i in todo]  # answered: never empty
        refs = [i.task.reference for _, i in todo]
        p, r, f = model.score(cands, refs, self.batch_size)
        for (s, _), pv, rv, fv in zip(todo, p, r, f, strict=True):
            s.values = {"bertscore_p": pv, "bertscore_r": rv, "bertscore_f1": fv}
        return out
