"""The report's analyses, one module each, registered with
``@register_analysis(name, order)`` (``report.model``): each reads ``Inputs`` and returns an
``Analysis`` of claims and notes. A new analysis is a new module here, or one in an
installed package (entry-point group ``arag_eval.analyses``); nothing else to edit."""

from report.model import Analysis, Claim, Inputs, Note, register_analysis, registered, run_all

__all__ = ["Analysis", "Claim", "Inputs", "Note", "register_analysis", "registered", "run_all"]
