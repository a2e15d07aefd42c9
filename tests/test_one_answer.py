"""One answer from one model: every writer renders the same claims and the same headline
rows; the answer is composed by one rule from the claims, in order of authority."""

from __future__ import annotations

import html
import re

import numpy as np

from report import console, overview
from report.model import Authority
from report.report import build_report, result_of
from report.writers import markdown as writers_md
from report.writers.html import html_body
from tests.test_report import rec, row, section

SEQUENTIAL = {"order_seed": 0, "max_tasks": None}


def _cells_md(text: str, run: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {run} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def _cells_html(page: str, run: str) -> list[str]:
    found = re.search(rf"<tr>\s*<td>{re.escape(html.escape(run))}</td>(.*?)</tr>", page, re.S)
    assert found, run
    return [run, *(html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", found.group(1)))]


def _cells_console(text: str, run: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(run + " "))
    return [run, *re.split(r"\s{2,}", line[len(run):].strip())]


def three_runs_one_skipping():
    """naive skips 10 of 40 tasks: the common set is 30 for everyone, and each run's own
    mean over its own tasks differs from its common-set mean."""
    rng = np.random.default_rng(3)
    records = {}
    for name, shift in (("arag", 0.5), ("naive", 0.0), ("stuffing", 0.2)):
        records[name] = [rec(f"t{k}", float(np.clip(3 + shift + rng.normal(0, 0.6), 1, 5)),
                             cost_usd=0.01 + shift / 100, latency_ms=900.0 + 100 * shift)
                         for k in range(40)]
    for k in range(30, 40):
        records["naive"][k] = {**records["naive"][k], "geval_coverage": None, "skipped": True,
                               "skip_reason": "exceeds the model's context"}
    rows = [row(name, geval_coverage_mean=float(np.mean([r["geval_coverage"] for r in recs
                                                         if r["geval_coverage"] is not None])),
                cost_usd_per_task=0.011, cost_usd_uncached_per_task=0.013 + 0.001 * k,
                latency_ms_p50=900.0 + 10 * k, n_tasks=40.0,
                n_answered=float(sum(not r["skipped"] for r in recs)))
            for k, (name, recs) in enumerate(records.items())]
    return rows, records


def test_each_systems_headline_reads_the_same_in_every_writer():
    """The decision metric's mean and n, cost per task, spend per task and P50 latency of
    every system, identical in the console, report.md, the MLflow description and
    compare.html: one table definition, over the common task set, rendered from one model."""
    rows, records = three_runs_one_skipping()
    text, data = build_report(rows, records, "t", ["geval_coverage"])
    result = result_of(rows, records, "t", ["geval_coverage"])
    terminal = console.verdict(result, "sqlite:///m.db")
    note = overview.description(result)
    page = html_body(writers_md.summary(data["answer"], data["headline"], "geval_coverage",
                                         data["analysis"].claims))
    for run in ("arag", "naive", "stuffing"):
        md = _cells_md(section(text, "Headline"), run)
        assert md == _cells_md(note, run) == _cells_html(page, run) == _cells_console(
            terminal, run), run
        assert md[2] == "30"  # the common set: naive's skips shrink it for every run
    # the mean shown is the common-set mean, not the run's own over its 40 tasks
    arag = next(r for r in data["headline"] if r["run"] == "arag")
    common = [x["geval_coverage"] for x in records["arag"][:30]]
    assert arag["geval_coverage_mean"] == np.mean(common) != rows[0]["geval_coverage_mean"]
    assert _cells_md(note, "arag")[1] == f"{np.mean(common):.3f}"


def planted_sequential_records(n: int = 60):
    """A small, consistent gain the fixed-sample Wilcoxon declares, but too few tasks for
    the anytime-valid interval to exclude 0."""
    rng = np.random.default_rng(9)
    base = rng.uniform(0.2, 0.6, n)
    gain = rng.normal(0.06, 0.15, n)
    return {"q9A": [rec(f"t{k}", None, rouge2_f1=float(base[k])) for k in range(n)],
            "q9B": [rec(f"t{k}", None, rouge2_f1=float(np.clip(base[k] + gain[k], 0, 1)))
                    for k in range(n)]}


def test_a_sequential_sweep_whose_intervals_are_open_is_undecided_on_every_line():
    records = planted_sequential_records()
    rows = [row(name, sequential=SEQUENTIAL, n_tasks_asked=60.0, n_tasks_of_data=249.0,
                n_tasks=60.0, n_answered=60.0, cost_usd_total=0.5) for name in records]
    fixed, fixed_data = build_report([row(n) for n in records], records, "t", ["rouge2_f1"])
    assert fixed_data["answer"].startswith("Decided: q9B beats q9A")  # the planted trap
    text, data = build_report(rows, records, "t", ["rouge2_f1"])
    [answer] = data["answers"]
    assert answer.mode == "undecided" and answer.descriptive_family
    assert [c.kind for c in answer.pending] == ["sequential"]
    assert answer.pending[0].ci[0] < 0 < answer.pending[0].ci[1]
    assert not any(c.decisive for c in data["analysis"].claims)
    assert all(c.authority in (Authority.descriptive, Authority.sequential)
               for c in data["analysis"].claims)
    assert data["answer"].startswith("Undecided by the anytime-valid intervals: q9A vs q9B")
    stating = [data["answer"], section(text, "Key finding"), section(text, "Paired comparisons")]
    for part in stating:
        for word in ("Decided", "beats", "**significant**", "significantly ahead",
                     "| significant |"):
            assert word not in part, (word, part[:300])
    assert "descriptive" in section(text, "Key finding")
    assert "| descriptive (significant) |" in section(text, "Paired comparisons")
    terminal = console.verdict(result_of(rows, records, "t", ["rouge2_f1"]), "sqlite:///m.db")
    assert "beats" not in terminal and "Decided" not in terminal


def four_external_runs():
    notes = [{"kind": "not_recorded", "field": f, "count": 200, "of": 200}
             for f in ("loops", "max_loops_reached", "model_calls")]
    rng = np.random.default_rng(4)
    records = {f"pipeline-{k} system=external": [
        rec(f"t{i}", None, rouge2_f1=float(rng.uniform(0.1, 0.4) + 0.02 * k), cost_usd=None,
            latency_ms=None) for i in range(40)] for k in range(4)}
    rows = [row(name, system="external", model_provider="offline", judge_provider="none",
                calls_models=False, system_notes=notes, synthetic=False, n_tasks=40.0,
                n_answered=40.0) for name in records]
    return rows, records


def test_a_four_run_external_sweep_fits_one_screen():
    rows, records = four_external_runs()
    result = result_of(rows, records, "t", ["rouge2_f1"], options={"slice_by": []})
    lines = console.verdict(result, "sqlite:///m.db").splitlines()
    assert len(lines) <= 30 and max(len(x) for x in lines) <= 120
    grouped = [x for x in lines if "give no" in x]
    assert len(grouped) == 1  # one line for four runs, three fields each
    assert grouped[0].startswith("! 4 runs give no")
    assert "loops, max_loops_reached or model_calls" in grouped[0]
    assert lines[-1].startswith("MLflow:") and any(x.startswith("report:") for x in lines)
    full = console.verdict(result_of(rows, records, "t", ["rouge2_f1"],
                                     options={"console": "full"}), "sqlite:///m.db")
    assert len(full.splitlines()) > len(lines)


def test_the_architecture_page_names_every_module_of_the_report():
    """docs/architecture.md's list of report/'s modules is kept true: every module is
    named there, and every name there under analyses/ and writers/ exists."""
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("    report/ ", 1)[1].split("    tracking/ ", 1)[0]
    named = set(re.findall(r"[a-z_]+", block))
    for folder in ("report", "report/analyses", "report/writers"):
        for module in (ROOT / folder).glob("*.py"):
            if module.stem not in ("__init__", "__main__"):
                assert module.stem in named, f"{folder}/{module.name} is not in docs/architecture.md"
    listed = block.split("returning claims and notes:", 1)[1].split(";", 1)[0]
    listed = re.sub(r"\([^)]*\)", "", listed)
    analyses = {name.strip() for name in listed.split(",")}
    assert analyses == {m.stem for m in (ROOT / "report" / "analyses").glob("*.py")} - {
        "__init__"}


SNAPSHOTS = __import__("pathlib").Path(__file__).parent / "snapshots"


def test_each_writer_keeps_its_wording(request):
    """One golden file per writer guards the wording (the other tests assert on claims and
    figures). After a deliberate change of words: UPDATE_SNAPSHOTS=1 pytest -k wording."""
    import os

    rows, records = three_runs_one_skipping()
    options = {"slice_by": ["document_tokens"]}
    text, data = build_report(rows, records, "t", ["geval_coverage"], options=options)
    result = result_of(rows, records, "t", ["geval_coverage"], options=options,
                       artifact_uri="file:///store/1/p/artifacts/report.html", run_id="p",
                       experiment_id="1")
    full = result_of(rows, records, "t", ["geval_coverage"],
                     options={**options, "console": "full"},
                     artifact_uri="file:///store/1/p/artifacts/report.html", run_id="p",
                     experiment_id="1")
    rendered = {
        "console_summary.txt": console.verdict(result, "sqlite:///mlruns/mlflow.db"),
        "console_full.txt": console.verdict(full, "sqlite:///mlruns/mlflow.db"),
        "report.md": text,
        "description.md": overview.description(result),
        "compare_header.html": html_body(writers_md.summary(
            data["answer"], data["headline"], "geval_coverage", data["analysis"].claims)),
    }
    for name, now in rendered.items():
        path = SNAPSHOTS / name
        if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
            path.write_text(now, encoding="utf-8")
        assert now == path.read_text(encoding="utf-8"), (
            f"{name} changed: if the new words are meant, UPDATE_SNAPSHOTS=1 pytest "
            f"{request.node.nodeid}")


def test_no_table_of_a_sweeps_report_is_wider_than_eight_columns_and_counts_are_whole():
    """Every table of report.md has at most 8 columns (wider ones are split into groups,
    the run column first in each); tokens and words are shown as whole counts."""
    from metrics.geval import ERROR_CODES
    from report.policy import report_metrics

    rows, records = three_runs_one_skipping()
    scores = {m.name: 0.5 for m in report_metrics() if not m.name.endswith(("tokens", "chunks"))}
    records = {name: [{**r, **scores, "context_tokens": (1891, 1892, 1892)[k % 3],
                       "word_count": (52, 53, 53)[k % 3], "loops": 3} for k, r in enumerate(recs)]
               for name, recs in records.items()}
    rows = [{**r, **{f"error_rate_{c}": 0.1 for c in ERROR_CODES}, "loops_mean": 3.0}
            for r in rows]
    text, _ = build_report(rows, records, "t", ["geval_coverage"])
    widths = [line.count("|") - 1 for line in text.splitlines() if line.startswith("|")]
    assert widths and max(widths) <= 8, max(widths)
    quality = section(text, "Quality")
    assert "| arag | 40 | 53 | 50 | 1,892 [1,892, 1,892] (n=30) |" in quality  # not 1891.667
    assert "1891.6" not in text and "52.6" not in quality


def test_a_bin_reads_as_a_range_whose_edges_can_be_told_apart():
    from report.writers.cells import value_range

    assert value_range(2_572, 4_520, " tokens") == "2.6k–4.5k tokens"
    assert value_range(None, 2_572, " tokens") == "below 2.6k tokens"
    assert value_range(4_520, None, " tokens") == "4.5k tokens and above"
    assert value_range(2_481.4, 2_530.0, " tokens") == "2,481–2,530 tokens"  # both 2.5k


def test_the_terminal_shows_words_never_markdown_marks():
    """The console renders the model in its own style (nothing stripped afterwards): no
    emphasis or code marks in either mode, the answer included, and no line wider than a
    terminal's 120 columns (``report.console=full`` wraps its paragraphs too)."""
    rows, records = three_runs_one_skipping()
    for mode in ("summary", "full"):
        result = result_of(rows, records, "t", ["geval_coverage"],
                           options={"slice_by": ["document_tokens"], "console": mode},
                           artifact_uri="file:///store/1/p/artifacts/report.html", run_id="p",
                           experiment_id="1")
        printed = console.verdict(result, "sqlite:///mlruns/mlflow.db")
        assert "**" not in printed and "`" not in printed, mode
        assert printed.lstrip().startswith("Decided: arag beats naive on geval_coverage"), mode
        assert "Ship stuffing: +0.384 geval_coverage over naive" in " ".join(printed.split())
        assert max(len(line) for line in printed.splitlines()) <= 120, mode  # wrapped, both
