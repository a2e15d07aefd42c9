"""The A-RAG loop and its prompts."""

from arag.agent.loop import AgentResult, run_agent
from arag.agent.prompts import system_prompt, task_prompt

__all__ = ["AgentResult", "run_agent", "system_prompt", "task_prompt"]
