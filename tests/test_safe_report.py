"""report.html and compare.html show what data holds as text, never run it.

A task's id, question, reference, document names, a model's prediction and a judge's
reasoning all reach the pages; any of them may carry HTML or a Markdown fence of its own
(a prompt injection in a document is enough). The fast tests render payloads through the
report's own Markdown path; the slow one runs a judged sweep over a dataset and a model
whose every text holds them, and opens both pages in Chromium, from disk and inside
MLflow's artifact viewer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from report.report import build_report
from report.writers.example_words import code, fenced
from report.writers.html import to_html
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import client_for, run_cli, write_mini_dataset
from tests.test_browser import (  # noqa: F401  (page: a fixture)
    _open_artifact,
    _parent,
    mlflow_ui,
    page,
)
from tests.test_report import rec, row

MARK = "document.title='pwned';window.pwned=1;alert(1)"
SCRIPT = f"<script>{MARK}</script>"
IMG = f'<img src=x onerror="{MARK}">'
PAYLOAD = f"```\n{SCRIPT}\n{IMG}\n````\n</code></pre>{SCRIPT}"


def _live_html(html: str) -> list[str]:
    """Markup the payloads would need to run: any tag they carry, unescaped."""
    return [bad for bad in ("<script>document", "<img src=x", "<img src=\"x\"", "onerror=\"doc")
            if bad in html]


def test_a_fenced_block_is_never_closed_by_its_own_text():
    markdown = f"before\n\n{fenced(PAYLOAD)}\n\nafter {code('`x`' + IMG)}\n"
    html = to_html(markdown, "t")
    assert html.count("<pre>") == 1 and "after" not in html.split("</pre>")[0]
    assert not _live_html(html)


def test_the_report_escapes_every_text_from_data():
    records = {name: [rec(f"t{k}{IMG}", score, predicted=f"{PAYLOAD} {name}",
                          reference=PAYLOAD, question=SCRIPT,
                          geval_coverage_reasoning=PAYLOAD)
                      for k, score in enumerate([4, 2, 5, 1, 3, 2])]
               for name in ("arag", "naive")}
    text, _ = build_report([row("arag"), row("naive")], records, f"Sweep {SCRIPT}")
    assert "### A failure" in text and SCRIPT in text  # the payloads are in the Markdown
    html = to_html(text, f"Sweep {SCRIPT}")
    assert not _live_html(html), _live_html(html)
    assert "&lt;script&gt;document.title" in html  # shown, as text


# --- the same in a browser, from a real sweep -------------------------------------------


def payload_dataset(root: Path) -> Path:
    """The mini dataset with a payload in every id, question, reference, document name and
    in the gold sentences (which the offline model copies into its predictions)."""
    write_mini_dataset(root, n_docs=2, filler=20)
    docs = [json.loads(x) for x in (root / "documents.jsonl").read_text().splitlines()]
    tasks = [json.loads(x) for x in (root / "tasks.jsonl").read_text().splitlines()]
    for doc, task in zip(docs, tasks, strict=True):
        name = doc["doc_id"] + SCRIPT
        task.update(id=f"{task['id']}`{IMG}", doc_ids=[name], question=f"{task['question']} "
                    f"{SCRIPT}", reference=f"{task['reference']}\n{PAYLOAD}",
                    gold_lines={name: task["gold_lines"][doc["doc_id"]]})
        path = root / doc["path"]
        path.write_text(path.read_text().replace("Third quarter revenue",
                                                 f"{SCRIPT} {IMG} Third quarter revenue"))
        doc["doc_id"] = name
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return root


def payload_judge(request: dict, n: int) -> dict:
    """The fake Claude judge, whose every score comes with payloads in its reasoning."""
    from tests.test_judge_sweep import judge

    prompt = request["messages"][-1]["content"]
    if "Faithfulness (1-5)" not in prompt and "Coverage (1-5)" not in prompt:
        return judge(request, n)  # not a G-Eval score: criteria, codes, claims
    return text_reply(f"{PAYLOAD}\n{IMG}\nFinal score: 2", request)


@pytest.fixture(scope="module")
def payload_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("payload")
    root = payload_dataset(tmp / "data")
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}  # the fake takes any key
    with FakeAnthropic(payload_judge) as fake:
        sweep = run_cli(tmp, "system=naive,stuffing", f"dataset.root={root}",
                        "judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
                        "judge.retry_base_delay_s=0.01", env=env)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    return tmp


def _pages(tmp: Path) -> dict[str, Path]:
    parent = _parent(tmp)
    client = client_for(tmp)
    return {name: Path(client.download_artifacts(parent.info.run_id, name, str(tmp / "pages")))
            for name in ("report.html", "compare.html")}


def _watch(browser_page) -> list[str]:
    events: list[str] = []
    browser_page.on("dialog", lambda d: (events.append(f"dialog: {d.message}"), d.dismiss()))
    browser_page.on("console", lambda m: events.append(f"console: {m.text}")
            if "pwned" in m.text or m.type == "error" else None)
    return events


def _nothing_ran(events: list[str]) -> None:
    assert not [e for e in events if "pwned" in e or e.startswith("dialog")], events


@pytest.mark.slow
def test_no_payload_runs_in_either_page_opened_from_disk(payload_sweep, page):  # noqa: F811
    pages = _pages(payload_sweep)
    for name, path in pages.items():
        text = path.read_text()
        assert "&lt;script&gt;document.title" in text, name  # the payloads reached the page
        assert not _live_html(text.replace("<script type='application/json'", "")), name
    events = _watch(page)
    for name, path in pages.items():
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_timeout(500)
        assert "pwned" not in page.evaluate("document.title"), name
        assert page.evaluate("window.pwned === undefined"), name
        assert SCRIPT in page.locator("body").inner_text(), name  # shown as text
    _nothing_ran(events)


@pytest.mark.slow
def test_no_payload_runs_in_either_page_inside_mlflow(payload_sweep, page):  # noqa: F811
    tmp = payload_sweep
    events = _watch(page)
    page.set_default_navigation_timeout(120_000)  # MLflow's UI loads slowly on a busy machine
    with mlflow_ui(tmp) as url:
        for name in ("report.html", "compare.html"):
            frame = _open_artifact(page, url, _parent(tmp), name)
            page.wait_for_timeout(500)
            assert frame.locator("body").evaluate(
                "b => document.title.indexOf('pwned') < 0 && window.pwned === undefined"), name
            assert page.evaluate("window.pwned === undefined"), name
            assert SCRIPT in frame.locator("body").inner_text(), name  # shown as text
            assert "pwned" not in page.title(), name
    _nothing_ran(events)
