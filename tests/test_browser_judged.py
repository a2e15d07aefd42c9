"""A judged sweep's compare.html inside MLflow's artifact viewer: each run's cell folds the
judge's reasoning per G-Eval dimension and draws the sections its chunks touched.

The judge is the fake Claude-compatible server of ``tests/test_judge_sweep.py``; the
screenshot goes to docs/mlflow-compare-judged.png.
"""

from __future__ import annotations

import os

import pytest

from tests.anthropic_fake import FakeAnthropic
from tests.conftest import ROOT, run_cli
from tests.test_browser import (  # noqa: F401  (page: a fixture)
    _close_assistant,
    _open_artifact,
    _parent,
    mlflow_ui,
    page,
)
from tests.test_judge_sweep import judge as fake_judge

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judged_ui(tmp_path_factory, shared_cache):
    tmp = tmp_path_factory.mktemp("judged_ui")
    key = os.environ.get("ANTHROPIC_API_KEY")
    os.environ["ANTHROPIC_API_KEY"] = "sk-ant-test"  # the fake server takes any key
    try:
        with FakeAnthropic(fake_judge) as fake:
            sweep = run_cli(tmp, "system=arag,naive", "dataset=sample", "dataset.limit=3",
                            "judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
                            "judge.retry_base_delay_s=0.01", cache=shared_cache)
    finally:
        if key is None:
            os.environ.pop("ANTHROPIC_API_KEY", None)
        else:
            os.environ["ANTHROPIC_API_KEY"] = key
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    with mlflow_ui(tmp) as url:
        yield url, tmp


def test_compare_page_shows_the_judges_reasoning_and_the_section_strip(judged_ui, page):  # noqa: F811
    url, tmp = judged_ui
    frame = _open_artifact(page, url, _parent(tmp), "compare.html")
    strips = frame.locator("div.sections")
    assert strips.count() == 6  # 3 tasks x 2 runs, each call split into remarks and Q&A
    assert "sections touched" in strips.first.inner_text()
    assert frame.locator("div.sections span.section").count() == 12
    panels = frame.locator("details.reasoning")
    assert panels.count() == 12  # faithfulness and coverage, per task and run
    panel = panels.first
    panel.locator("summary").click()
    reply = panel.locator("div.out").inner_text()
    assert panel.get_attribute("open") is not None and reply.strip()
    assert panel.locator("summary").inner_text().startswith("judge: ")
    panel.scroll_into_view_if_needed()
    _close_assistant(page)
    page.screenshot(path=str(ROOT / "docs" / "mlflow-compare-judged.png"))
