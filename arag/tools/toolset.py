"""The agent's tools, A-RAG semantics (arXiv 2602.03442).

* ``keyword_search(keywords, top_k)``: exact keyword matches, scored by count × length.
* ``semantic_search(query, top_k)``: chunks ranked by their best-matching sentence, or by
  ``retrieval.method`` (bm25, hybrid; ``arag.retrieval.search``).
* ``chunk_read(chunk_ids)``: full chunks with their metadata header; a chunk already read
  returns a marker instead of its text again. At most ``read_budget`` chunks are read in
  all (the context budget every retrieving system shares; the tool's description says so).
* ``chunk_summarize(chunk_ids, focus)`` (optional): the named chunks condensed toward a
  focus by one model call (``Toolset.summarize``, which the system binds to its call log,
  so the call is costed, cached and traced inside the tool call); the offline model answers
  it with its extractive summary.

Search results name chunks as ``Chunk ID: <id>`` with a one-sentence snippet. Tools are
read-only and scoped: under ``scope=document`` they see only the task's documents,
whatever a document or the model asks for. Bad arguments raise ``ToolError``; the agent
loop sends its message back to the model as an ``is_error`` tool result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from arag.llm.base import ToolSpec
from arag.retrieval.index import Hit, SearchIndex
from arag.retrieval.search import Method, rank_chunks

MAX_TOP_K = 20
MAX_READ = 10
SUMMARY_WORDS = 120  # what one chunk_summarize call may write


class ToolError(Exception):
    """The model called a tool wrongly; the message goes back to it."""


TOOL_SPECS: dict[str, ToolSpec] = {
    "keyword_search": ToolSpec(
        "keyword_search",
        "Find chunks containing exact keywords or phrases (case-insensitive), e.g. company "
        "names, metric names, figures. Returns chunk ids with a matching sentence.",
        {
            "type": "object",
            "properties": {
                "keywords": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                             "description": "Keywords or short phrases to match exactly."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 5},
            },
            "required": ["keywords"],
        },
    ),
    "semantic_search": ToolSpec(
        "semantic_search",
        "Find chunks whose sentences are closest in meaning to a natural-language query. "
        "Returns chunk ids with the best-matching sentence.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 5},
            },
            "required": ["query"],
        },
    ),
    "chunk_read": ToolSpec(
        "chunk_read",
        "Read the full text of chunks by id (ids come from search results). A chunk you "
        "have already read is not returned again.",
        {
            "type": "object",
            "properties": {
                "chunk_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "maxItems": MAX_READ},
            },
            "required": ["chunk_ids"],
        },
    ),
    "chunk_summarize": ToolSpec(
        "chunk_summarize",
        "Summarize chunks by id toward a focus (e.g. the question, or one aspect of it) in "
        f"at most {SUMMARY_WORDS} words, keeping figures exact and citing the chunks. Use it "
        "to condense many chunks at once instead of reading each in full.",
        {
            "type": "object",
            "properties": {
                "chunk_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "maxItems": MAX_READ},
                "focus": {"type": "string", "minLength": 1,
                          "description": "What the summary should concentrate on."},
            },
            "required": ["chunk_ids", "focus"],
        },
    ),
}
# (passages, focus, words) -> the model's summary: one call made through the task's call log
Summarize = Callable[[str, str, int], str]


@dataclass
class ToolResult:
    text: str
    chunk_ids: list[str]  # chunks named (search) or returned (read)


@dataclass
class Toolset:
    """Tools bound to one task: its index, its scope and what it has read so far."""

    index: SearchIndex
    scope_doc_ids: list[str] | None  # None: the whole corpus
    names: list[str]
    snippet_words: int = 40
    default_top_k: int = 5  # retrieval.top_k: what a search returns when the model names no top_k
    method: Method = field(default_factory=Method)  # how semantic_search ranks (retrieval.method)
    read_budget: int | None = None  # chunks chunk_read returns in all (None: no limit)
    summarize: Summarize | None = None  # the model call behind chunk_summarize
    read_order: list[str] = field(default_factory=list)
    summarized: list[str] = field(default_factory=list)  # chunks condensed by chunk_summarize

    def __post_init__(self) -> None:
        unknown = [n for n in self.names if n not in TOOL_SPECS]
        if unknown:
            raise ValueError(f"unknown tools {unknown} in system.tools; known: {sorted(TOOL_SPECS)}")
        if "chunk_summarize" in self.names and self.summarize is None:
            raise ValueError("chunk_summarize needs a model call: pass Toolset(summarize=...)")
        if not 1 <= self.default_top_k <= MAX_TOP_K:
            raise ValueError(f"retrieval.top_k={self.default_top_k}: the search tools return 1 to "
                             f"{MAX_TOP_K} chunks")

    @property
    def specs(self) -> list[ToolSpec]:
        """The tools' specs, their top_k default being this run's retrieval.top_k and
        chunk_read naming the read budget."""
        specs = [_with_default_top_k(TOOL_SPECS[n], self.default_top_k) for n in self.names]
        if self.read_budget is None:
            return specs
        note = f" You can read at most {self.read_budget} chunks in total."
        return [replace(s, description=s.description + note) if s.name == "chunk_read" else s
                for s in specs]

    def call(self, name: str, arguments: Any) -> ToolResult:
        if name not in self.names:
            raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(self.names)}")
        if not isinstance(arguments, dict):
            raise ToolError(f"{name} takes a JSON object of arguments")
        return getattr(self, f"_{name}")(**_checked(name, arguments))

    def _keyword_search(self, keywords: list[str], top_k: int | None = None) -> ToolResult:
        hits = self.index.keyword_search(keywords, top_k or self.default_top_k,
                                         self.scope_doc_ids)
        return self._render_hits(hits, f"keywords {keywords}")

    def _semantic_search(self, query: str, top_k: int | None = None) -> ToolResult:
        hits = rank_chunks(self.index, query, top_k or self.default_top_k, self.scope_doc_ids,
                           self.method)
        return self._render_hits(hits, f"query {query!r}")

    @property
    def used(self) -> list[str]:
        """Every chunk whose text reached the model, read or summarized, in first-use order."""
        return list(dict.fromkeys(self.read_order + self.summarized))

    @property
    def budget_spent(self) -> bool:
        """Whether the context budget is used up (no budget: never)."""
        return self.read_budget is not None and len(self.used) >= self.read_budget

    def _in_scope(self, cid: str) -> bool:
        chunk = self.index.by_id.get(cid)
        return chunk is not None and (self.scope_doc_ids is None
                                      or chunk.doc_id in self.scope_doc_ids)

    def _chunk_summarize(self, chunk_ids: list[str], focus: str) -> ToolResult:
        assert self.summarize is not None
        found = [cid for cid in dict.fromkeys(chunk_ids) if self._in_scope(cid)]
        if not found:
            raise ToolError("none of the chunk ids exist; use ids exactly as search results "
                            "print them after 'Chunk ID:'")
        over = self._over_budget(found)
        found = [cid for cid in found if cid not in over]
        if not found:
            raise ToolError(f"the context budget of {self.read_budget} chunks is spent; "
                            "summarize chunks you have read, or answer")
        passages = "\n\n".join(f'<chunk id="{cid}">\n{self.index.by_id[cid].text}\n</chunk>'
                                for cid in found)
        summary = self.summarize(passages, focus, SUMMARY_WORDS).strip()
        self.summarized.extend(c for c in found if c not in self.summarized)
        missing = [cid for cid in chunk_ids if cid not in found and cid not in over]
        note = f"\n[chunks {missing} do not exist in the searchable documents]" if missing else ""
        if over:
            note += f"\n[chunks {over} not summarized: the context budget is spent]"
        return ToolResult(f'<summary chunks="{", ".join(found)}">\n{summary}\n</summary>{note}',
                          found)

    def _over_budget(self, chunk_ids: list[str]) -> list[str]:
        """The chunks, not yet used, that would take the context past ``read_budget``
        (a summarized chunk counts as much as a read one)."""
        if self.read_budget is None:
            return []
        new = [cid for cid in chunk_ids if cid not in self.used]
        return new[max(0, self.read_budget - len(self.used)):]

    def _chunk_read(self, chunk_ids: list[str]) -> ToolResult:
        parts: list[str] = []
        returned: list[str] = []
        known = False  # an id that exists, even if not returned (read before, over budget)
        for cid in chunk_ids:
            if not self._in_scope(cid):
                parts.append(f"[chunk {cid} does not exist in the searchable documents]")
                continue
            known = True
            chunk = self.index.by_id[cid]
            if cid in self.read_order:
                parts.append(f"[chunk {cid} was already read above; its text is not repeated]")
                continue
            if self.read_budget is not None and cid not in self.summarized \
                    and len(self.used) >= self.read_budget:
                parts.append(f"[chunk {cid} not read: the context budget of {self.read_budget} "
                             "chunks is spent; answer from what you have read]")
                continue
            self.read_order.append(cid)
            returned.append(cid)
            parts.append(f'<chunk id="{cid}">\n{chunk.text}\n</chunk>')
        if not known:
            raise ToolError("none of the chunk ids exist; use ids exactly as search results "
                            "print them after 'Chunk ID:'")
        return ToolResult("\n".join(parts), returned)

    def _render_hits(self, hits: list[Hit], what: str) -> ToolResult:
        if not hits:
            return ToolResult(f"No chunks match {what}.", [])
        lines = []
        for h in hits:
            words = h.snippet.split()
            more = " ..." if len(words) > self.snippet_words else ""
            snippet = " ".join(words[: self.snippet_words]) + more
            lines.append(f"Chunk ID: {h.chunk_id}\nScore: {h.score:.3f}\nSnippet: {snippet}")
        return ToolResult("\n\n".join(lines), [h.chunk_id for h in hits])


def _with_default_top_k(spec: ToolSpec, top_k: int) -> ToolSpec:
    props = spec.input_schema["properties"]
    if "top_k" not in props or props["top_k"].get("default") == top_k:
        return spec
    schema = {**spec.input_schema, "properties": {**props, "top_k": {**props["top_k"],
                                                                     "default": top_k}}}
    return replace(spec, input_schema=schema)


def _checked(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Validate arguments against the declared schema (types, finite numbers, ranges,
    lengths); every violation is a ToolError that goes back to the model."""
    schema = TOOL_SPECS[name].input_schema
    props = schema["properties"]
    missing = [k for k in schema["required"] if k not in args]
    if missing:
        raise ToolError(f"{name}: missing required argument(s) {missing}")
    extra = [k for k in args if k not in props]
    if extra:
        raise ToolError(f"{name}: unknown argument(s) {extra}; takes {sorted(props)}")
    check = {"array": _string_list, "integer": _integer, "string": _string}
    return {key: check[props[key]["type"]](f"{name}: {key}", value, props[key])
            for key, value in args.items()}


def _string_list(what: str, value: Any, spec: dict[str, Any]) -> list[str]:
    if isinstance(value, str):
        value = [value]  # one keyword or id given bare: what the model meant
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise ToolError(f"{what} must be a non-empty list of strings")
    most = spec.get("maxItems")
    if most is not None and len(value) > most:
        raise ToolError(f"{what} takes at most {most} items per call, got {len(value)}; "
                        "split them over several calls")
    return value


def _integer(what: str, value: Any, spec: dict[str, Any]) -> int:
    """A whole number within the schema's range: not a string, a boolean, 1.5, NaN or
    infinity (``1e400`` is valid JSON and reads as infinity)."""
    low, high = spec["minimum"], spec["maximum"]
    whole = isinstance(value, int) and not isinstance(value, bool) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if not whole:
        raise ToolError(f"{what} must be a whole number from {low} to {high}, got {value!r:.40}")
    if not low <= value <= high:
        raise ToolError(f"{what} must be from {low} to {high}, got {value!r:.40}")
    return int(value)


def _string(what: str, value: Any, spec: dict[str, Any]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{what} must be a non-empty string")
    return value
