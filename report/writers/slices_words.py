"""Words for "Where each system wins" (``report/analyses/slices.py``) and "By document length"
(``report/analyses/length.py``): numeric bins read as ranges ("below 2.6k tokens")."""

from __future__ import annotations

from report.model import Claim, Note
from report.writers.caveat_words import fixed
from report.writers.cells import UNKNOWN, Style, count, interval, number, p_value, signed, value_range
from report.writers.judge_words import table
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
                f"than {MIN_UNTIED} tasks with a value, or no spread in it or in the difference).")
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


fixed(slices_no_pair=("`report.slice_by` names {features}, but fewer than two systems are compared: "
                      "there is no pair to slice, so no slices are given.",) * 2,
      slices_missing_feature=("No compared task has the feature `{feature}`, so nothing is sliced by it: "
                              "its records do not carry it (runs scored before document features "
                              "existed: re-score with mode=evaluate).",) * 2)


@words("slices_pooled")
def pooled(n: Note, style: Style, short: bool) -> str:
    datasets = n.counts["datasets"]
    return (f"Slices pool {len(datasets)} datasets ({', '.join(style.code(d) for d in datasets)}), each task "
            "paired only with itself; a feature that differs between them (document length) may stand for "
            f"the dataset: {style.code('report.slice_by=[...,dataset]')} tests that too.")


UNIT = " tokens"


@words("length_breakdown")
def breakdown(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    if f.get("too_few"):
        return "Too few tasks with a known document length to split them by length."
    ranges = [value_range(lo, hi, UNIT) for lo, hi in f["bins"]]
    if short or not style.markdown:
        return f"{c.metric} by document length ({' / '.join(ranges)}): " + "; ".join(
            f"{run} " + " / ".join(number(mean) for mean, _ in cells)
            for run, cells in f["cells"].items())
    intro = ((f"On {style.code(f['dataset'])}: " if f["dataset"] else "") + "Tasks by thirds of "
             "their documents' length in tokens (≈4 characters a token): " + " / ".join(
                 map(str, f["sizes"])) + " tasks; each cell: the mean over the run's answered tasks "
             "in that bin (n).\n\n" if f["first"] else "")
    return intro + style.strong(style.code(c.metric or "")) + table(
        style, short, ["run", *ranges],
        [[run, *(f"{number(mean) if mean is not None else UNKNOWN} (n={n})" for mean, n in cells)]
         for run, cells in f["cells"].items()])


@words("length_value")
def length_value(c: Claim, style: Style, short: bool) -> str:
    f, (r, w), key = c.figures, c.runs, style.code(c.metric or "")
    docs = f"{f['end']} documents ({value_range(f['range'][0], f['range'][1], UNIT)})"
    lead = (f"On {style.code(f['dataset'])}, by" if f.get("dataset") else "By") + " document length:"
    lead = style.strong(lead) + " " if f["end"] == "short" else ""
    if f["outcome"] == "only_option":
        return (f"{lead}Retrieval is the only option for {docs}: {w} skipped all {f['skipped']} "
                f"(over its context limit), so {r} answers where {w} cannot.")
    if f["outcome"] == "none_scored":
        return f"{lead}For {docs}, no task of this length was scored by both."
    numbers = (f"{key} {r} {number(f['mine'])} vs {w} {number(f['theirs'])} on {c.n_tasks} tasks"
               + (f", difference {signed(c.difference)} [95% CI {interval(c.ci, sign=True)[1:]}"
                  if c.ci else ""))
    said = {"same": f"Retrieval does not clearly add value for {docs} on {key}: {numbers}; the "
                    "two score the same",
            "unclear": f"Retrieval does not clearly add value for {docs} on {key}: {numbers}; {f['ahead']} "
                       f"is ahead, but the CI includes 0: {c.n_tasks} tasks cannot tell the two apart",
            "adds": f"Retrieval adds value for {docs} on {key}: {numbers}, because {r}'s chosen "
                    "chunks beat reading the whole document on the same tasks",
            "not": f"Retrieval does not add value for {docs} on {key}: {numbers}, because {w}, "
                   "reading the whole document, scores better on the same tasks than the chunks "
                   "retrieval picks"}[f["outcome"]]
    also = (f"; {w} also skipped {f['skipped']} of {f['of']} (over its context limit)"
            if f["skipped"] else "")
    # the small-n rule holds for every sentence that generalises (docs/verdict.md)
    small = (f" (small n: {c.n_tasks} tasks are too few to say this of {docs} in general)"
             if f["small"] else "")
    return lead + said + also + small + "."
