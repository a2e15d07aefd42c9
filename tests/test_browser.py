"""What a user sees: the MLflow UI over a real sweep, driven in headless Chromium.

Starts `mlflow ui` on 127.0.0.1 over the sweep's store, opens the experiment's runs page,
expands the sweep's parent run and checks the three child runs are listed, then opens the
parent's artifacts and checks the report is there. Screenshots go to docs/ (the README
shows them). Needs Debian's chromium (`make test` installs it when missing).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, all_runs, run_cli

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(tmp_path_factory, shared_cache):
    tmp = tmp_path_factory.mktemp("ui")
    sweep = run_cli(tmp, "system=arag,naive,stuffing", "dataset=sample", cache=shared_cache)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow ui did not start within 90 s")
    yield url, tmp
    proc.terminate()
    proc.wait(timeout=30)


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


def test_experiment_page_lists_the_sweep_and_its_three_children(ui, page):
    url, tmp = ui
    parent = next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")
    page.goto(f"{url}/#/experiments/{parent.info.experiment_id}/runs", wait_until="load")
    page.get_by_text(parent.info.run_name[:20], exact=False).first.wait_for(timeout=60_000)
    page.locator("button[data-component-id*=runnamecellrenderer]").first.click()
    for name in ("system=arag", "system=naive", "system=stuffing"):
        page.get_by_text(name, exact=True).first.wait_for(timeout=30_000)
    (ROOT / "docs").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "docs" / "mlflow-sweep.png"))


def test_parent_run_artifacts_hold_the_report(ui, page):
    url, tmp = ui
    parent = next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")
    page.goto(f"{url}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"
              "/artifacts", wait_until="load")
    page.get_by_text("report.md", exact=True).first.wait_for(timeout=60_000)
    page.get_by_text("report.md", exact=True).first.click()
    page.get_by_text("Key finding", exact=False).first.wait_for(timeout=30_000)
    page.screenshot(path=str(ROOT / "docs" / "mlflow-report.png"))
    assert Path(ROOT / "docs" / "mlflow-report.png").stat().st_size > 10_000
