"""The README as a newcomer uses it: its commands run exactly as written in a fresh shell
with no virtualenv on PATH, its links lead somewhere, and the console stays quiet.

A README command runs in a copy of the project's code (so the sweep fills the copy's
default store, never this checkout's ``mlruns/``) with ``.venv`` linked in, through
``env -i PATH=/usr/bin:/bin bash -lc '<command>'``: nothing activated, nothing inherited.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.anthropic_fake import FakeAnthropic, agent_policy
from tests.conftest import ROOT, store_overrides

README = ROOT / "README.md"
CODE = ("run.py", "pyproject.toml", "conf", "arag", "metrics", "runners", "report", "labelling",
        "tracking")
# linked by name from the README, written in their own change: checked once they exist
WRITTEN_ELSEWHERE = {"docs/your-documents.md", "docs/your-pipeline.md", "docs/models.md"}
MAX_FRONT_DOOR_LINES = 120


def readme_commands() -> list[str]:
    """Every command line of the README's code blocks (comments dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def readme_command(start: str) -> str:
    found = [c for c in readme_commands() if c.startswith(start)]
    assert found, f"the README has no command starting {start!r}"
    return found[0]


def project_copy(tmp: Path) -> Path:
    """The project's code and sample data in ``tmp``, with the same ``.venv``."""
    copy = tmp / "arag-eval"
    copy.mkdir()
    for name in CODE:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(
            src, copy / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                 if src.is_dir() else {}))
    shutil.copytree(ROOT / "data" / "sample", copy / "data" / "sample")
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    return copy


def fresh_shell(command: str, cwd: Path, home: Path, timeout: int = 900, **env: str):
    """``command`` as a user types it in a new login shell: no venv, no inherited env."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", *assignments,
                           "bash", "-lc", command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_the_front_door_fits_on_a_first_screen_and_says_how_to_run_a_command():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_FRONT_DOOR_LINES
    for needed in ("make run", "make test", "source .venv/bin/activate", ".venv/bin/python run.py",
                   "make ui", "docs/your-documents.md"):
        assert needed in text, needed
    # every time figure in the front door names the bench command it comes from
    assert "bench/ectsum_sweep.py" in text and "611 s" in text


def test_a_readme_command_runs_as_written_in_a_fresh_shell(tmp_path):
    command = readme_command(".venv/bin/python run.py --help")
    done = fresh_shell(command, ROOT, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "system: arag, arag_summarize" in done.stdout  # Hydra's list of config groups


def test_progress_bars_name_their_job_and_step_and_switch_off(capsys):
    from arag import progress

    try:
        progress.configure(True, "job 2/3 naive")
        with progress.bar("embedding", 4, "sentence") as shown:
            shown.update(4)
        assert "job 2/3 naive: embedding: " in capsys.readouterr().err
        progress.configure(False, "job 2/3 naive")  # runner.progress=false
        with progress.bar("embedding", 4, "sentence") as shown:
            shown.update(4)
        assert capsys.readouterr().err == ""
    finally:
        progress.configure(True)


def _heading_slugs(markdown: str) -> set[str]:
    """GitHub's anchors for a page's headings."""
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        slugs.add(slug)
    return slugs


def _links(page: Path) -> list[tuple[str, str]]:
    """(target file relative to the repository, anchor) of every relative link in a page."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("<"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page.resolve()
        out.append((str(resolved.relative_to(ROOT.resolve())), anchor))
    return out


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: p.name)
def test_every_link_of_the_readme_and_the_docs_resolves(page):
    missing = []
    for target, anchor in _links(page):
        file = ROOT / target
        if not file.exists():
            if target not in WRITTEN_ELSEWHERE:
                missing.append(target)
            continue
        if anchor and file.suffix == ".md" and anchor not in _heading_slugs(file.read_text()):
            missing.append(f"{target}#{anchor}")
    assert missing == [], missing


def test_the_readme_links_every_docs_page():
    linked = {target for target, _ in _links(README)}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, pages - linked


@pytest.mark.slow
def test_the_readme_sample_sweep_runs_as_written_in_a_fresh_shell(tmp_path):
    command = readme_command(".venv/bin/python run.py -m system=arag,naive,stuffing dataset=sample")
    copy = project_copy(tmp_path)
    done = fresh_shell(command, copy, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    tail = done.stdout.strip().splitlines()[-8:]
    assert any(line.startswith("report:") and line.endswith("report.html") for line in tail)
    assert (copy / "mlruns" / "mlflow.db").exists()  # the default store, in the copy


@pytest.mark.slow
def test_claude_http_request_lines_show_only_with_runner_verbose(tmp_path):
    """anthropic 2.x logs one INFO line per request through httpx2: not at the default
    verbosity, and there with ``runner.verbose=1`` (so this test can tell)."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}

    def run(url: str, *extra: str):
        cmd = [sys.executable, "run.py", "system=naive", "dataset=sample", "dataset.limit=2",
               "model=claude-haiku-4-5", f"model.base_url={url}", "metrics.scorers=[rouge]",
               *store_overrides(tmp_path), f"hydra.run.dir={tmp_path}/outputs", *extra]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)

    with FakeAnthropic(agent_policy()) as fake:
        quiet = run(fake.url)
        loud = run(fake.url, "runner.verbose=1", "runner.rerun=true", "cache.mode=off")
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr[-2000:] + loud.stderr[-2000:]
    assert "HTTP Request" not in quiet.stdout + quiet.stderr
    assert "HTTP Request: POST" in loud.stderr


def test_help_opens_with_what_the_tool_does_and_how_to_start():
    done = subprocess.run([sys.executable, "run.py", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("arag-eval: does agentic retrieval (A-RAG) beat naive top-k RAG")
    head = "\n".join(lines[:15])
    for part in ("make run", "make test", "python run.py -m system=arag,naive,stuffing dataset=sample",
                 "max_loops=3,6,12,22"):
        assert part in head, part
    assert "== Configuration groups ==" in done.stdout
    assert "system: arag, arag_summarize" in done.stdout
    assert "README.md" in done.stdout and "--cfg job" in done.stdout
    assert len(lines) < 60  # the whole config is behind --cfg job, not dumped here


def test_make_data_without_any_dataset_exits_non_zero_and_names_the_docs(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    done = subprocess.run(["make", "--no-print-directory", "data", f"SHARED_DATA={tmp_path}/none"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "no dataset found" in done.stderr and "docs/datasets.md: Real datasets" in done.stderr
    assert "## Real datasets" in (ROOT / "docs" / "datasets.md").read_text()


def fresh_clone(tmp: Path) -> Path:
    """The tracked files of this checkout as a clone has them (uncommitted edits included),
    in a folder with no ``../shared`` beside it."""
    tree = subprocess.run(["git", "stash", "create"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip() or "HEAD"
    clone = tmp / "alone" / "arag-eval"
    clone.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", tree], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x"], cwd=clone, input=archive.stdout, check=True)
    assert not (clone.parent / "shared").exists()
    return clone


def upstream_stand_in(tmp: Path) -> str:
    """A local bare repository in place of github.com/rajdeep345/ECTSum (no network here)."""
    work = tmp / "ectsum-work"
    work.mkdir()
    (work / "README.md").write_text("ECTSum stand-in\n")
    for args in (["init", "-q"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data"]):
        subprocess.run(["git", *args], cwd=work, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(tmp / "ectsum.git")], check=True)
    return f"file://{tmp / 'ectsum.git'}"


def documented_clone_lines() -> list[str]:
    """The ECTSum clone command of docs/datasets.md and of docs/ci.md's GitHub Actions job."""
    pattern = r"git clone (?:--depth 1 )?https://github\.com/rajdeep345/ECTSum data/datasets/ectsum"
    lines = [re.search(pattern, (ROOT / "docs" / page).read_text()) for page in ("datasets.md", "ci.md")]
    assert all(lines), "the ECTSum clone line is gone from docs/datasets.md or docs/ci.md"
    return [m.group(0) for m in lines if m]


def make_data(clone: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "data"], cwd=clone,
                          capture_output=True, text=True, timeout=60)


def test_a_fresh_clone_without_shared_gets_the_data_both_documented_ways(tmp_path):
    clone = fresh_clone(tmp_path)
    assert not os.path.lexists(clone / "data" / "datasets")  # nothing committed there
    nothing = make_data(clone)
    assert nothing.returncode != 0 and "no dataset found" in nothing.stderr, nothing.stderr
    assert "git clone https://github.com/rajdeep345/ECTSum data/datasets/ectsum" in nothing.stdout
    upstream = upstream_stand_in(tmp_path)
    for line in documented_clone_lines():
        target = clone / "data" / "datasets" / "ectsum"
        shutil.rmtree(target, ignore_errors=True)
        command = line.replace("https://github.com/rajdeep345/ECTSum", upstream)
        done = subprocess.run(command, shell=True, cwd=clone, capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)
        assert (target / "README.md").read_text() == "ECTSum stand-in\n"
    cloned = make_data(clone)
    assert cloned.returncode == 0 and "data/datasets/ectsum: already there" in cloned.stdout
    # once a shared folder is beside the clone, make data links what it holds
    (clone.parent / "shared" / "datasets" / "financebench").mkdir(parents=True)
    (clone.parent / "shared" / "datasets" / "financebench" / "x.pdf").write_text("pdf")
    linked = make_data(clone)
    assert linked.returncode == 0, linked.stderr
    assert (clone / "data" / "datasets" / "financebench" / "x.pdf").read_text() == "pdf"
