"""What a user sees after `make run`: the console's last lines, then the MLflow UI over the
sweep, driven in headless Chromium.

Starts `mlflow ui` on 127.0.0.1 over the sweep's store and walks it as docs/running.md
says: the experiment opens on MLflow 3's GenAI overview; the sidebar's "Model training"
switch shows the runs list with the sweep; expanding it lists the three child runs; the
sweep's own page shows the verdict in its description; report.html and compare.html
render in MLflow's artifact viewer (a sandboxed frame: plots must be inline, sorting must
run there), and a trace link followed there leaves the page in place and gives the trace's
address, which opens the trace. Screenshots of each step go to docs/ (the README and
docs/running.md show them). Needs Debian's chromium (`make test` installs it when missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, all_runs, client_for, run_cli

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_ui(tmp: Path):
    """``mlflow ui`` on a free local port over the store in ``tmp``; yields its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180  # its workers start slowly on a loaded machine
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow ui did not start within 180 s")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    # as `make run` does it the first time: a cache of its own (every long step runs, so every
    # progress bar shows whatever other tests put in a shared cache), the terminal's bars
    sweep = run_cli(tmp, "system=arag,naive,stuffing", "dataset=sample", "runner.progress=true")
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    with mlflow_ui(tmp) as url:
        yield url, tmp, sweep


@pytest.fixture(scope="module")
def page():
    if CHROMIUM is None:
        missing = "chromium is not installed (apt-get install chromium; `make test` does it)"
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: CI must run the browser check")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 900})
        browser.close()


def _parent(tmp):
    return next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")


def _close_assistant(page) -> None:
    """MLflow's assistant panel covers a third of the page: close it for screenshots."""
    try:
        page.locator("button[aria-label='Close']").last.click(timeout=3_000)
    except Exception:  # noqa: BLE001 - a UI without the panel
        pass


def _dismiss_tips(page) -> None:
    """The GenAI overview opens with a tip ("Got it") that takes every click until closed."""
    try:
        page.get_by_text("Got it", exact=True).first.click(timeout=5_000)
    except Exception:  # noqa: BLE001 - a UI without the tip
        pass


def _screenshot(page, name: str) -> None:
    _close_assistant(page)
    (ROOT / "docs").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "docs" / name))


def test_console_ends_with_the_verdict_and_no_download_bars(ui):
    _, tmp, sweep = ui
    lines = sweep.stdout.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith(("Decided", "Nothing decided",
                                                                     "No average", "Ship ")))
    verdict = lines[start:]  # one screen: the answer to the run's address
    # at most 30 lines of at most 120 characters; a file path is never cut
    assert len(verdict) <= 30 and max(len(line) for line in verdict
                                      if not line.startswith(("report:", "compare:"))) <= 120
    for system in ("arag", "naive", "stuffing"):  # the headline table
        assert any(line.startswith(system + " ") for line in verdict), (system, verdict)
    assert any(line.startswith("! offline model") for line in verdict)  # caveats by kind
    assert any(line.startswith("report:") and line.endswith("report.html") for line in verdict)
    where = " ".join(verdict[-2:])  # the MLflow address, its URL on a line of its own if long
    assert "make ui" in where and _parent(tmp).info.run_id in where
    for noise in ("Downloading artifacts", "Loading weights", "Using default tokenizer",
                  "Flushing the async trace"):
        assert noise not in sweep.stdout + sweep.stderr, noise
    assert re.search(r"job 2/3 naive: +100%", sweep.stderr)  # one bar per job, with its place
    for step in ("job 1/3 arag: loading embedder", "job 1/3 arag: embedding",
                 "job 1/3 arag: BERTScore", "job 3/3 stuffing: traces"):  # every long step
        assert step in sweep.stderr, step


def test_parent_run_carries_the_comparison_and_every_child_trace_its_scores(ui):
    import mlflow

    _, tmp, _ = ui
    parent, client = _parent(tmp), client_for(tmp)
    children = [r for r in all_runs(tmp) if r.data.tags.get("system")]
    for child in children:
        name = child.data.tags["run_label"]  # what the report calls it
        assert name == child.data.tags["system"]  # swept key system: named by the system
        assert child.info.run_name.startswith(f"{name} sample")  # and the data
        assert parent.data.metrics[f"{name}/n_tasks"] == child.data.metrics["n_tasks"]
        assert parent.data.metrics[f"{name}/rouge2_f1_mean"] == child.data.metrics[
            "rouge2_f1_mean"]
        assert child.data.metrics["headline/rouge2_f1_mean"] == child.data.metrics[
            "rouge2_f1_mean"]
    table = json.loads(Path(client.download_artifacts(
        parent.info.run_id, "comparison_table.json", str(tmp / "table"))).read_text())
    assert sorted(row[0] for row in table["data"]) == ["arag", "naive", "stuffing"]
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    for child in children:
        traces = mlflow.search_traces(locations=[child.info.experiment_id],
                                      run_id=child.info.run_id, return_type="list")
        assert len(traces) == child.data.metrics["n_tasks"]
        references = {t["id"]: t["reference"] for t in map(json.loads, (
            ROOT / "data/sample/tasks.jsonl").read_text().splitlines())}
        for trace in traces:
            names = {a.name for a in trace.info.assessments}
            assert {"rouge2_f1", "bertscore_f1", "expected_response"} <= names, names
            rouge = next(a for a in trace.info.assessments if a.name == "rouge2_f1")
            assert 0.0 <= rouge.value <= 1.0 and rouge.value == round(rouge.value, 4)
            expected = next(a for a in trace.info.assessments if a.name == "expected_response")
            assert expected.value == references[trace.info.trace_metadata["task_id"]]


def _key_finding(tmp) -> str:
    """The key finding as the sweep's report.md states it (its first paragraph)."""
    parent = _parent(tmp)
    text = Path(client_for(tmp).download_artifacts(parent.info.run_id, "report.md",
                                                   str(tmp / "kf"))).read_text()
    return text.split("## Key finding\n\n", 1)[1].split("\n\n", 1)[0].strip()


def _answer(tmp) -> str:
    """The one-sentence answer as the sweep's report.md states it, under its title."""
    parent = _parent(tmp)
    text = Path(client_for(tmp).download_artifacts(parent.info.run_id, "report.md",
                                                   str(tmp / "answer"))).read_text()
    return text.split("**Answer:** ", 1)[1].split("\n", 1)[0].strip()


def test_runs_read_well_in_mlflow_description_rounded_metrics_no_machine_paths(ui):
    from tracking.runs import rounded

    _, tmp, _ = ui
    parent, client = _parent(tmp), client_for(tmp)
    note = parent.data.tags["mlflow.note.content"]
    answer = _answer(tmp)
    assert answer.startswith(("Decided: ", "Nothing decided"))
    # the answer, then the caveats, then the verdict's details
    assert note.startswith(f"**{answer}**\n\n")
    assert note.index("Caveats") < note.index(
        f"**Verdict** (decided on `rouge2_f1`): {_key_finding(tmp)}")
    assert all(f"| {s} |" in note for s in ("arag", "naive", "stuffing"))  # the headline table
    assert "Caveats" in note and "offline" in note
    for run in all_runs(tmp):
        for name, value in run.data.metrics.items():
            assert value == rounded(name, value), (name, value)  # 4 significant digits
    for child in (r for r in all_runs(tmp) if r.data.tags.get("system")):
        params = child.data.params
        assert not [k for k, v in params.items() if v.startswith(("/", "sqlite:////"))], params
        paths = json.loads(Path(client.download_artifacts(
            child.info.run_id, "paths.json", str(tmp / "paths" / child.info.run_id))).read_text())
        assert Path(paths["embedder_path_used"]).is_dir()
        assert paths["tracking.uri"] == f"sqlite:///{tmp}/mlflow.db"


def test_a_user_lands_on_the_experiment_finds_the_sweep_and_reads_its_verdict(ui, page):
    url, tmp, _ = ui
    parent = _parent(tmp)
    page.goto(f"{url}/#/experiments/{parent.info.experiment_id}", wait_until="load")
    page.wait_for_url(re.compile(r"/overview"), timeout=60_000)  # MLflow 3: the GenAI view
    _dismiss_tips(page)
    page.get_by_text("Model training", exact=True).first.click()  # docs/running.md
    page.get_by_text(parent.info.run_name[:20], exact=False).first.wait_for(timeout=60_000)
    assert "/runs" in page.url
    page.locator("button[data-component-id*=runnamecellrenderer]").first.click()
    for name in ("arag", "naive", "stuffing"):  # each job's run, named with the data
        page.get_by_text(f"{name} sample", exact=True).first.wait_for(timeout=30_000)
    _screenshot(page, "mlflow-sweep.png")
    page.get_by_role("link", name=re.compile(f"^{re.escape(parent.info.run_name)}")).first.click()
    page.wait_for_url(re.compile(parent.info.run_id), timeout=60_000)
    answer = page.get_by_text(_answer(tmp)[:60], exact=False).first
    answer.wait_for(timeout=60_000)
    overview = page.locator("body").inner_text()
    finding = re.sub(r"\*\*|`", "", _key_finding(tmp))
    assert "decided on rouge2_f1" in overview and finding[:60] in overview
    # the description folds to its first 100 px (MLflow 3): the answer is inside them,
    # above the fade, before "Show more"
    fade = page.get_by_test_id("truncation-gradient").first.bounding_box()
    box = answer.bounding_box()
    assert fade is not None and box is not None
    assert box["y"] < fade["y"] and box["y"] + box["height"] <= fade["y"] + fade["height"]
    _screenshot(page, "ui-parent-overview.png")


def _open_artifact(page, url: str, run, name: str):
    page.goto(f"{url}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"
              "/artifacts", wait_until="load")
    page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
    page.get_by_text(name, exact=True).first.click()
    frame = page.frame_locator("iframe.mlflow-html-iframe")
    frame.locator("h1").first.wait_for(timeout=60_000)
    return frame


def test_report_renders_its_plots_inside_the_mlflow_ui(ui, page):
    url, tmp, _ = ui
    parent = _parent(tmp)
    html = Path(client_for(tmp).download_artifacts(parent.info.run_id, "report.html",
                                                   str(tmp / "html"))).read_text()
    sources = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    frame = _open_artifact(page, url, parent, "report.html")
    frame.get_by_text("Key finding").first.wait_for(timeout=30_000)
    widths = frame.locator("img").evaluate_all("els => els.map(e => e.naturalWidth)")
    assert len(widths) == len(sources) and all(w > 0 for w in widths), widths
    # every table scrolls in its own box: the page itself is never wider than the frame
    assert frame.locator("table").count() == frame.locator("div.scroll > table").count() > 0
    assert frame.locator("body").evaluate("b => b.scrollWidth <= window.innerWidth")
    _screenshot(page, "mlflow-report.png")
    text = Path(client_for(tmp).download_artifacts(parent.info.run_id, "report.md",
                                                   str(tmp / "md"))).read_text()
    assert "](plots/" not in text and "`plots/comparison.png`" in text


def test_compare_page_sorts_tasks_by_a_difference_inside_the_mlflow_ui(ui, page):
    url, tmp, _ = ui
    parent = _parent(tmp)
    frame = _open_artifact(page, url, parent, "compare.html")
    tasks = [json.loads(line)["id"] for line in
             (ROOT / "data/sample/tasks.jsonl").read_text().splitlines()]
    body = frame.locator("body").inner_text()
    assert all(t in body for t in tasks) and all(s in body for s in ("arag", "naive", "stuffing"))
    frame.locator("#runA").select_option(label="arag")
    frame.locator("#runB").select_option(label="naive")
    diffs = [float(d) for d in frame.locator("#rows td.diff").all_inner_texts() if d != "n/a"]
    assert len(diffs) == len(tasks) and diffs == sorted(diffs, reverse=True)
    link = frame.locator("a.trace").first.get_attribute("href")
    assert link.startswith(url) and "/traces/tr-" in link
    _screenshot(page, "mlflow-compare.png")


def test_a_trace_link_followed_in_the_artifact_viewer_keeps_the_page_and_opens_the_trace(
        ui, page):
    url, tmp, _ = ui
    parent = _parent(tmp)
    frame = _open_artifact(page, url, parent, "compare.html")
    link = frame.locator("a.trace").first
    href = link.get_attribute("href")
    link.click()  # the viewer's sandbox lets no link leave the frame
    note = frame.locator(".trace-note input").first
    note.wait_for(timeout=10_000)
    assert note.input_value() == href  # the address to open in a new tab
    assert frame.locator("h1").first.is_visible()  # the page did not blank
    assert frame.locator("#rows tr").count() == 6
    _screenshot(page, "ui-compare-trace-link.png")
    page.goto(href, wait_until="load")  # what a new tab with that address shows
    trace_id = href.rsplit("/traces/", 1)[1]
    page.get_by_text(trace_id[3:10], exact=False).first.wait_for(timeout=60_000)
    page.get_by_text("Summarize the key highlights", exact=False).first.wait_for(timeout=30_000)
    _screenshot(page, "ui-trace.png")


def test_two_sweeps_on_the_same_data_are_told_apart_in_the_run_list(ui, page):
    """Last in the file: it adds a second sweep (other systems, repeats) to the store. The run
    list names each by its data, systems and the setting that differs, the Dataset column
    filled; the Run Name column, widened by its edge as a user would, shows the whole name."""
    url, tmp, _ = ui
    first = _parent(tmp)
    second = run_cli(tmp, "system=naive,stuffing", "dataset=sample", "runner.repeats=2")
    assert second.returncode == 0, second.stderr[-2000:]
    parents = [r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"]
    names = [p.info.run_name for p in parents]
    assert len(names) == 2 == len(set(names)) and first.info.run_name in names
    assert any("repeats=2" in n for n in names), names
    page.goto(f"{url}/#/experiments/{first.info.experiment_id}", wait_until="load")
    _dismiss_tips(page)
    page.get_by_text("Model training", exact=True).first.click()
    for name in names:
        page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
    header = page.locator(".ag-header-cell", has_text="Run Name").first
    box = header.bounding_box()
    assert box is not None
    edge = (box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    page.mouse.move(*edge)
    page.mouse.down()
    page.mouse.move(edge[0] + 260, edge[1], steps=10)
    page.mouse.up()
    page.mouse.move(700, 700)  # off the header: no tooltip over the list
    datasets = page.get_by_text("sample (", exact=False)
    assert datasets.count() >= 2  # the Dataset column: the data and its digest, per sweep
    page.wait_for_timeout(2_000)  # the list greys while it refreshes; the UI polls, so no idle
    _screenshot(page, "ui-run-list.png")
