"""Self-preference: an LLM judge favours answers written by a model of its own family
(Panickssery et al., "LLM Evaluators Recognize and Favor Their Own Generations", 2024). A
judge of the same family as a judged run's model is flagged, and a panel judge of another
family is suggested (``judge.panel``; the panel's figures and agreement are reported).
"""

from __future__ import annotations

import re

from report.model import Analysis, Inputs, Note, register_analysis

# family -> the pattern of model names and ids in it (lower case)
FAMILIES = {"Claude": r"claude|anthropic", "GPT": r"gpt|\bo[134]\b|\bo[134]-", "Gemini": r"gemini",
            "Llama": r"llama", "Qwen": r"qwen", "Mistral": r"mistral|mixtral",
            "Gemma": r"gemma", "DeepSeek": r"deepseek", "Phi": r"\bphi"}
# a judge of another family that conf/judge ships, to suggest for ``judge.panel``
OTHER_JUDGE = {"Claude": "gpt-4o-mini"}
DEFAULT_OTHER_JUDGE = "claude-haiku-4-5"


def family(*names: str | None) -> str | None:
    """The model family these names (configured name, model id) belong to; None: unknown."""
    text = " ".join(n for n in names if n).lower()
    return next((f for f, pattern in FAMILIES.items() if re.search(pattern, text)), None)


@register_analysis("self_preference", 60)
def self_preference(inputs: Inputs) -> Analysis:
    """A caveat per judge whose family is that of a judged run's model."""
    out = Analysis()
    by_judge: dict[tuple[str, str], list[str]] = {}
    for row in inputs.finished:
        judge = row.get("judge")
        if not judge or row.get("judge_provider") in (None, "none", "offline"):
            continue
        mine = family(judge, row.get("judge_model_id"))
        if mine is not None and mine == family(row.get("model"), row.get("model_id")):
            by_judge.setdefault((judge, mine), []).append(f"{row['run']} ({row.get('model')})")
    for (judge, mine), runs in by_judge.items():
        panel = {j for row in inputs.finished for j in row.get("judge_panel") or []}
        other = sorted(j for j in panel if family(j) not in (None, mine))
        out.notes.append(Note("self_preference", "How far the judge can be trusted", tuple(runs),
                              {"judge": judge, "family": mine, "panel_other_family": other,
                               "suggest": OTHER_JUDGE.get(mine, DEFAULT_OTHER_JUDGE)}))
    return out
