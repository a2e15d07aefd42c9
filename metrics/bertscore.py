"""BERTScore computed once per text: one model per process, references embedded once.

Hydra's basic launcher runs every job of a sweep in one process, and every system of a
sweep is scored against the same references. So the model is loaded once per process
(``bertscore_model``, keyed by its settings) and the references' token embeddings are
kept (least recently used first out, ``REFERENCE_CACHE_BYTES``) for the next system.

Scores are bert_score's own: its tokenization (``sent_encode``), layer, greedy matching
(``greedy_cos_idf``) in the same pair batches, no idf weighting and no baseline rescaling,
as ``BERTScorer.score`` does with those settings. Only the batching of the token
embeddings differs: by token count, one length a batch and nothing padded
(``arag.retrieval.embedder.length_batches``). That is faster, and it makes a text's token
embeddings depend on the text alone, which a cache needs: bert_score pads each batch to its
longest text, and on this stack padding moves the last bits of the result with the other
texts of the call (~1e-7 on a score), so a cached reference could not otherwise give the
score a fresh call gives. Where bert_score pads nothing, the scores are bit-identical.

The model runs on the run's device (``retrieval.embedder.device``: ``auto`` is the GPU
where torch sees one), in batches that suit it; the token embeddings are kept and matched
on the CPU, as bert_score matches them there.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict, defaultdict
from functools import lru_cache

from arag import progress
from arag.memory import settle
from arag.retrieval.embedder import (
    batch_rows,
    filled,
    fit_threads,
    length_batches,
    resolve_device,
)

log = logging.getLogger(__name__)
REFERENCE_CACHE_BYTES = 512 * 1024 ** 2

TokenStats = tuple  # (token embeddings [tokens x dim], idf weights [tokens])


class BertScoreModel:
    """The BERTScore model of one (model path, layer, device) and its reference cache;
    thread-safe."""

    def __init__(self, model_path: str, num_layers: int, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from bert_score import BERTScorer

        self.device = device
        self.batch_texts = batch_rows(None, device)  # texts of one token length at once
        log.info("BERTScore: %s, %d layers, on %s", model_path, num_layers, device)
        with progress.bar("loading BERTScore model", 1, "model") as shown:
            scorer = BERTScorer(model_type=model_path, num_layers=num_layers, device=device)
            shown.update(1)
        self._model = scorer._model
        self._tokenizer = scorer._tokenizer
        # BERTScorer.score without idf: every token weighs 1 but [SEP] and [CLS]
        self._idf: dict[int, float] = defaultdict(lambda: 1.0)
        self._idf[self._tokenizer.sep_token_id] = 0
        self._idf[self._tokenizer.cls_token_id] = 0
        self._references: OrderedDict[str, TokenStats] = OrderedDict()
        self._reference_bytes = 0
        self._lock = threading.Lock()
        self.texts_embedded = 0  # how many texts went through the model (for tests, bench)

    def score(self, cands: list[str], refs: list[str], batch_size: int = 64
              ) -> tuple[list[float], list[float], list[float]]:
        """(P, R, F1) of each candidate against its reference."""
        import torch
        from bert_score.utils import greedy_cos_idf

        if len(cands) != len(refs):
            raise ValueError(f"{len(cands)} candidates for {len(refs)} references")
        with self._lock:
            stats = self._reference_stats(refs)
            stats.update(self._embed([c for c in dict.fromkeys(cands) if c not in stats]))
        preds = []
        with torch.no_grad():
            for start in range(0, len(refs), batch_size):
                ref_batch = _pad([stats[r] for r in refs[start:start + batch_size]])
                hyp_batch = _pad([stats[c] for c in cands[start:start + batch_size]])
                preds.append(torch.stack(greedy_cos_idf(*ref_batch, *hyp_batch, False), dim=-1))
        p, r, f = torch.cat(preds).unbind(-1) if preds else (torch.zeros(0),) * 3
        return p.tolist(), r.tolist(), f.tolist()

    def _reference_stats(self, refs: list[str]) -> dict[str, TokenStats]:
        wanted = list(dict.fromkeys(refs))
        new = self._embed([r for r in wanted if r not in self._references])
        for text, value in new.items():
            self._references[text] = value
            self._reference_bytes += _nbytes(value)
        stats = {}
        for text in wanted:
            self._references.move_to_end(text)
            stats[text] = self._references[text]
        while self._reference_bytes > REFERENCE_CACHE_BYTES and len(self._references) > len(wanted):
            _, old = self._references.popitem(last=False)
            self._reference_bytes -= _nbytes(old)
        return stats

    def _embed(self, texts: list[str]) -> dict[str, TokenStats]:
        """Token embeddings and idf weights of each text, in batches of one token length."""
        import torch
        from bert_score.utils import bert_encode, sent_encode

        ids = [sent_encode(self._tokenizer, t) for t in texts]
        out: dict[str, TokenStats] = {}
        with progress.bar("BERTScore", len(texts), "text", show=bool(texts)) as shown:
            for batch in length_batches([len(i) for i in ids], self.batch_texts):
                rows = filled(batch, len(ids[batch[0]]))  # small batches take other kernels
                x = torch.tensor([ids[i] for i in rows], dtype=torch.long, device=self.device)
                emb = bert_encode(self._model, x, attention_mask=torch.ones_like(x)).cpu()
                for j, i in enumerate(batch):
                    idf = torch.tensor([self._idf[t] for t in ids[i]], dtype=torch.float)
                    out[texts[i]] = (emb[j].clone(), idf)
                shown.update(len(batch))
        self.texts_embedded += len(texts)
        return out


def _pad(stats: list[TokenStats]):
    """bert_score's pad_batch_stats: padded embeddings, the mask of real tokens, padded idf."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    emb, idf = zip(*stats, strict=True)
    lens = torch.tensor([e.size(0) for e in emb], dtype=torch.long)
    mask = torch.arange(int(lens.max()), dtype=torch.long).expand(len(lens), -1) < lens.unsqueeze(1)
    return (pad_sequence(list(emb), batch_first=True, padding_value=2.0), mask,
            pad_sequence(list(idf), batch_first=True))


def _nbytes(value: TokenStats) -> int:
    return sum(t.element_size() * t.nelement() for t in value)


def bertscore_model(model_path: str, num_layers: int, device: str = "auto") -> BertScoreModel:
    """One BERTScore model per process and settings, shared by every job of a sweep;
    ``device`` as ``retrieval.embedder.device`` (``auto``: the GPU where there is one)."""
    return _loaded_model(model_path, num_layers, resolve_device(device))


@lru_cache(maxsize=4)
def _loaded_model(model_path: str, num_layers: int, device: str) -> BertScoreModel:
    fit_threads()
    model = BertScoreModel(model_path, num_layers, device)
    settle()  # the model, torch and transformers live as long as the process
    return model
