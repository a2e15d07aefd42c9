"""Cost from usage and the per-million-token prices in ``conf/model/*.yaml``."""

from __future__ import annotations

from dataclasses import dataclass

from arag.llm.base import Usage


@dataclass(frozen=True)
class Prices:
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @classmethod
    def from_config(cls, cfg) -> Prices:
        return cls(cfg.price_input, cfg.price_output, cfg.price_cache_read, cfg.price_cache_write)

    def cost_usd(self, usage: Usage) -> float:
        """input_tokens excludes cached tokens, as the Messages API reports it."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_input_tokens * self.cache_read
            + usage.cache_creation_input_tokens * self.cache_write
        ) / 1_000_000
