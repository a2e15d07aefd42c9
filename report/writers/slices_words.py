"""Words for "Where each system wins": each pair's interaction with a document feature,
the crossover plots and the notes on what could not be sliced."""

from __future__ import annotations

from report.model import Claim, Note
from report.writers.cells import Style, count, p_value
from report.writers.words import words

MIN_UNTIED = 6
# how a feature is said in a sentence, and the unit of its values
FEATURES = {"document_tokens": ("document length", " tokens"),
            "evidence_position": ("where the gold evidence lies (0 start, 1 end)", ""),
            "n_documents": ("the number of documents", " documents"),
            "dataset": ("the dataset", "")}


def feature_words(feature: str, style: Style) -> tuple[str, str]:
    return FEATURES.get(feature, (style.code(feature), ""))


def _p(c: Claim, name: str = "p") -> str:
    floor = c.figures.get("p_floor")
    p = p_value(c.p, floor)
    adjusted = p_value(c.p_adjusted, floor)
    sep = " " if p.startswith("≤") else " = "
    return (f"{c.rule}, {name}{sep}{p}, Holm-adjusted p"
            f"{' ' if adjusted.startswith('≤') else ' = '}{adjusted}, n = {c.n_tasks}")


@words("interaction")
def interaction(c: Claim, style: Style, short: bool) -> str:
    a, b = c.runs
    f = c.figures
    name, unit = feature_words(str(f["feature"]), style)
    if short and c.decisive:
        floor = f.get("p_floor")
        p = p_value(c.p_adjusted, floor)
        p = p if p.startswith("≤") else f"= {p}"
        if f.get("edge") is not None:
            return (f"{f['above']} ahead above ~{count(f['edge'])}{unit}, {f['below']} below "
                    f"on {c.metric} (interaction p {p}, Holm-adjusted)")
        if f.get("leads"):
            return "; ".join(f"{side} ahead on {', '.join(bins)}" for side, bins in
                             f["leads"].items() if bins) + f" on {c.metric} (interaction p {p})"
        return f"{a} vs {b} on {c.metric} depends on {name} (interaction p {p})"
    pooled = f.get("datasets") or []
    over = (f" over {len(pooled)} datasets ({', '.join(style.code(n) for n in pooled)}; each "
            "task paired with itself)" if len(pooled) > 1 else "")
    head = f"{style.strong(a)} vs {style.strong(b)} on {style.code(c.metric or '')}{over}: "
    if c.p is None:
        return (head + f"whether the difference depends on {name} cannot be tested (fewer "
                f"than {MIN_UNTIED} tasks with a value, or no spread in it or in the "
                "difference).")
    if not c.decisive:
        return head + f"no evidence that the difference depends on {name} ({_p(c)})."
    if f.get("leads") is not None:
        where = "; ".join(f"{side} ahead on {', '.join(bins)}" for side, bins in
                          f["leads"].items() if bins)
        return head + f"the difference depends on {name}: {where} ({_p(c)})."
    if f.get("edge") is None:
        return (head + f"the difference depends on {name}: {a}'s "
                f"{'advantage grows' if f.get('grows') else 'advantage shrinks'} as it "
                f"increases, without changing hands ({_p(c)}).")
    return (head + f"the difference depends on {name}: {f['above']} ahead above "
            f"~{count(f['edge'])}{unit}, {f['below']} below ({_p(c)}).")


@words("plot")
def plot(c: Claim, style: Style, short: bool) -> str:
    name = c.figures["name"]
    return f"![{name}](plots/{name}.png)" if style.markdown else f"(plot: plots/{name}.png)"


@words("slices_no_pair")
def no_pair(n: Note, style: Style, short: bool) -> str:
    return (f"{style.code('report.slice_by')} names {n.counts['features']}, but fewer than two "
            "systems are compared: there is no pair to slice, so no slices are given.")


@words("slices_missing_feature")
def missing_feature(n: Note, style: Style, short: bool) -> str:
    return (f"No compared task has the feature {style.code(n.counts['feature'])}, so nothing "
            "is sliced by it: its records do not carry it (runs scored before document "
            "features existed, or a dataset that does not say it; re-score with "
            "mode=evaluate).")


@words("slices_pooled")
def pooled(n: Note, style: Style, short: bool) -> str:
    datasets = n.counts["datasets"]
    return (f"Slices pool {len(datasets)} datasets ({', '.join(style.code(d) for d in datasets)}),"
            " each task paired only with itself; a feature that differs between them (document "
            f"length) may stand for the dataset: {style.code('report.slice_by=[...,dataset]')} "
            "tests that too.")
