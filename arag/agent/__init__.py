"""The A-RAG loop and its prompts."""

from arag.agent.loop import AgentResult, run_agent
from arag.agent.prompts import PROMPT_VERSION, prompt_texts, system_prompt, task_prompt

__all__ = ["PROMPT_VERSION", "AgentResult", "run_agent", "prompt_texts", "system_prompt",
           "task_prompt"]
