"""Agent tools: keyword_search, semantic_search, chunk_read, chunk_summarize."""

from arag.tools.toolset import TOOL_SPECS, ToolError, ToolResult, Toolset

__all__ = ["TOOL_SPECS", "ToolError", "ToolResult", "Toolset"]
