"""Live tests against the real Anthropic API: opt in with --runapi and ANTHROPIC_API_KEY."""

from __future__ import annotations

import pytest

from arag.llm import make_model

pytestmark = pytest.mark.api


def test_one_real_call_reports_usage(make_cfg):
    model = make_model(make_cfg("model=claude-haiku-4-5").model)
    reply = model.complete("Answer in one word.", [{"role": "user", "content": "Say ok."}],
                           max_tokens=10)
    assert reply.text and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
