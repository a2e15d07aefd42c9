"""People's labels of a judged sweep's answers: read from a labels file or from HUMAN
feedback on traces, held against the judge per dimension (kappa, Spearman, balanced
accuracy, with CIs), between labellers, flagged when low, quoted by the verdict; and the
sample to label, as a template and as a page that runs no script from the data."""

from __future__ import annotations

import json
import sys
from html import escape as html_escape
from pathlib import Path

import pytest

from labelling import (
    Read,
    labelled_name,
    page,
    page_answers,
    rubrics,
    stratified_sample,
    template_lines,
)
from metrics.agreement import kappa
from report import human_agreement
from report.writers.markdown import section_of
from report.writers.words import say
from tests import forked
from tests.conftest import ROOT, store_overrides
from tracking.human_labels import HumanLabel, LabelsError, read_feedback_labels, read_labels_file

# judged runs: each judged field logs its parse failures
JUDGED = {"judge_calls": 40.0, "geval_faithfulness_parse_failures": 0.0,
          "geval_coverage_parse_failures": 0.0}
ROWS = [{"run": "arag", "run_id": "r1", "system": "arag", **JUDGED},
        {"run": "naive", "run_id": "r2", "system": "naive", **JUDGED}]


def records(n: int = 20) -> dict[str, list[dict]]:
    """Two runs' judged records: faithfulness cycles 1-5, coverage 5-1."""
    return {rid: [{"id": f"t{k}", "predicted": f"answer {k}", "question": "q",
                   "geval_faithfulness": 1 + k % 5, "geval_coverage": 5 - k % 5}
                  for k in range(n)] for rid in ("r1", "r2")}


def label(task: str, system: str, dim: str, score: int, who: str = "ana",
          scale: str = "1-5") -> HumanLabel:
    return HumanLabel(task, system, dim, score, who, "file labels.jsonl", scale)


def test_kappa_matches_the_textbook_examples():
    # Cohen's kappa, the worked example of Wikipedia's "Cohen's kappa" article: 50
    # applications, both yes 20, A yes B no 5, A no B yes 10, both no 15: kappa = 0.40
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert kappa(a, b).value == pytest.approx(0.4)
    # quadratic-weighted, computed by hand on a 1-3 scale (weights (i-j)^2/4): observed
    # disagreement 0.25/3, chance disagreement 3.75/9, kappa = 1 - 0.2 = 0.8
    assert kappa([1, 2, 3], [1, 3, 3], "quadratic", (1, 2, 3)).value == pytest.approx(0.8)
    # and scikit-learn agrees on random 1-5 ratings
    from sklearn.metrics import cohen_kappa_score
    rng = __import__("numpy").random.default_rng(3)
    x = rng.integers(1, 6, 40)
    y = (x + rng.integers(-1, 2, 40)).clip(1, 5)
    assert kappa(list(x), list(y), "quadratic", range(1, 6)).value == pytest.approx(
        cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    found = kappa(a, b)
    assert found.ci_low < 0.4 < found.ci_high and found.n == 50
    assert kappa([3, 3], [3, 3]) is None  # one value throughout: undefined, not 0 or 1


def test_a_labels_file_is_read_and_a_bad_line_names_file_line_and_fix(tmp_path):
    good = tmp_path / "labels.jsonl"
    good.write_text(
        json.dumps({"task_id": "t1", "system": "arag", "dimension": "geval_faithfulness",
                    "score": 4, "labeller": "ana"}) + "\n\n"
        + json.dumps({"task_id": "t2", "system": "arag", "dimension": "geval_faithfulness",
                      "score": None, "labeller": None, "answer": "x", "question": "q"}) + "\n")
    assert read_labels_file(good) == [label("t1", "arag", "geval_faithfulness", 4)]
    base = {"task_id": "t1", "system": "arag", "dimension": "d", "score": 3, "labeller": "a"}
    for line, says in [("{not json", "not JSON"), (json.dumps({**base, "score": 7}), "score 7"),
                       (json.dumps({**base, "score": "4"}), "is not a number"),
                       (json.dumps({k: v for k, v in base.items() if k != "labeller"}),
                        "missing labeller"),
                       (json.dumps({**base, "scroe": 3}), "unknown key scroe"),
                       (json.dumps({**base, "system": ""}), "system '' is not a name")]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(base) + "\n" + line + "\n")
        with pytest.raises(LabelsError) as err:
            read_labels_file(bad)
        assert f"{bad}:2: " in str(err.value) and says in str(err.value)
        assert "Fix:" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(LabelsError, match="no such file"):
        read_labels_file(tmp_path / "missing.jsonl")


def test_agreement_per_dimension_between_labellers_and_the_low_flag():
    labels = [label(f"t{k}", s, "geval_faithfulness", 1 + k % 5)
              for k in range(20) for s in ("arag", "naive")]  # as the judge: kappa 1
    labels += [label(f"t{k}", "arag", "geval_coverage", 1 + k % 5) for k in range(20)]  # reversed
    labels += [label(f"t{k}", "arag", "geval_faithfulness", 1 + (k + 1) % 5, "bo")
               for k in range(10)]
    labels.append(label("t99", "arag", "geval_faithfulness", 3))  # no such answer
    found = human_agreement.compare(labels, records(), ROWS)
    cover, faith = found.judge  # by dimension name
    assert (faith.dimension, faith.scale, faith.n, faith.unmatched) == \
        ("geval_faithfulness", "1-5", 50, 0)
    assert found.left_out == ["1 label(s) for a task that system did not answer in this "
                              "sweep: arag/t99"]
    assert 0.4 < faith.kappa.value < 1 and not faith.low
    assert faith.spearman is not None and faith.kappa.ci_low is not None
    assert cover.kappa.value < 0 and cover.low and cover.spearman.rho < 0
    (pair,) = found.labellers
    assert (pair.first, pair.second, pair.n) == ("ana", "bo", 10)
    text = section_of(human_agreement.claims(found))
    assert "## Agreement with your labels" in text and "### Between labellers" in text
    assert "| `geval_coverage` | 1-5 | 20 | quadratic-weighted kappa -" in text
    assert "**low** (< 0.4)" in text and "| `geval_faithfulness` | ana, bo | 10 |" in text
    (agreement,) = human_agreement.agreement(found)
    assert [(a["dimension"], a["kappa"]["n"]) for a in agreement.figures["judge"]] == \
        [("geval_coverage", 20), ("geval_faithfulness", 50)]
    quote = say(agreement)
    assert quote.startswith("**Judge checked against your labels:** `geval_coverage` "
                            "quadratic-weighted kappa -")
    assert "(n=50)" in quote and "(n=20) — **low**" in quote
    assert "labels: 71 from file labels.jsonl" in quote
    assert "Agreement is low on `geval_coverage`" in quote


def test_yes_no_labels_use_the_judges_threshold_and_balanced_accuracy():
    # the judge says "consistent" at 4 or 5 of 5 (metrics.meta_eval's threshold)
    labels = [label(f"t{k}", "arag", "geval_faithfulness", int(1 + k % 5 >= 4), scale="yes/no")
              for k in range(20)]
    compared = human_agreement.compare(labels, records(), ROWS)
    (found,) = compared.judge
    assert found.scale == "yes/no" and found.threshold == 4.0
    assert found.kappa.value == pytest.approx(1.0) and found.balanced_accuracy[0] == 1.0
    text = section_of(human_agreement.claims(compared))
    assert "yes/no (judge yes at ≥ 4)" in text and "| 100.0" in text
    assert "No answer was labelled by two people" in text


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """One MLflow store for this module's tests (creating its schema takes seconds)."""
    from mlflow import MlflowClient

    folder = tmp_path_factory.mktemp("store")
    MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db").search_experiments()
    return folder


def test_the_verdict_quotes_the_labels_instead_of_the_unvalidated_caveat(store):
    from mlflow import MlflowClient

    from report.meta_eval import trust, validations

    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    judged = [{"judge_calls": 12.0, "judge": "claude-haiku-4-5",
               "judge_model_id": "claude-haiku-4-5", "judge_prompt_version": "v"}]
    measured = validations(client, judged)
    assert [c.kind for c in trust(measured)] == ["judge_unvalidated"]
    found = human_agreement.compare(
        [label(f"t{k}", "arag", "geval_faithfulness", 1 + k % 5) for k in range(20)],
        records(), ROWS)
    (quoted,) = trust(measured, human_agreement.agreement(found))  # the caveat is gone
    assert quoted.kind == "people_agreement"
    assert say(quoted).startswith("**Judge checked against your labels:**")
    # labels that match no judged answer quote nothing: the caveat stays
    unscored = [{**rec, "geval_faithfulness": None} for rec in records()["r1"]]
    none = human_agreement.compare([label("t1", "arag", "geval_faithfulness", 3)],
                                   {"r1": unscored}, ROWS)
    assert human_agreement.agreement(none) == []
    assert [c.kind for c in trust(measured, human_agreement.agreement(none))] == ["judge_unvalidated"]


def test_human_feedback_on_traces_is_read_back_as_labels(store):
    import mlflow
    from mlflow.entities import AssessmentSource

    mlflow.set_tracking_uri(f"sqlite:///{store}/mlflow.db")
    try:
        exp = mlflow.create_experiment("fb", artifact_location=str(store / "art"))
        run = mlflow.MlflowClient().create_run(exp).info.run_id
        ids = []
        for task in ("t1", "t2"):
            span = mlflow.start_span_no_context(
                name=task, metadata={"mlflow.sourceRun": run, "task_id": task},
                experiment_id=exp)
            span.end()
            ids.append(span.trace_id)
        mlflow.flush_trace_async_logging()
        person = AssessmentSource(source_type="HUMAN", source_id="ana@example.com")
        mlflow.log_feedback(trace_id=ids[0], name="geval_faithfulness", value=4, source=person)
        mlflow.log_feedback(trace_id=ids[1], name="geval_faithfulness", value=False,
                            source=person)  # the UI's yes/no
        mlflow.log_feedback(trace_id=ids[1], name="note", value="unclear", source=person)
        mlflow.log_feedback(trace_id=ids[0], name="geval_faithfulness", value=2,
                            source=AssessmentSource(source_type="LLM_JUDGE", source_id="j"))
        found = read_feedback_labels(exp, {run: "arag"})
    finally:
        mlflow.set_tracking_uri(None)
    assert sorted(found, key=lambda x: x.task_id) == [
        HumanLabel("t1", "arag", "geval_faithfulness", 4, "ana@example.com", "MLflow feedback",
                   "1-5"),
        HumanLabel("t2", "arag", "geval_faithfulness", 0, "ana@example.com", "MLflow feedback",
                   "yes/no")]


def test_the_sample_is_stratified_by_run_and_score_and_its_page_runs_no_data():
    recs = {"arag": records()["r1"], "naive": records()["r2"]}
    recs["arag"][0]["predicted"] = "</script><script>alert(1)</script> & <b>x</b>"
    picked = stratified_sample(recs, "geval_faithfulness", 10)
    assert len(picked) == 10
    for run in ("arag", "naive"):  # every run, each of its five judge scores once
        assert sorted(r["geval_faithfulness"] for s, r in picked if s == run) == [1, 2, 3, 4, 5]
    assert stratified_sample(recs, "geval_faithfulness", 10) == picked  # seeded
    lines = template_lines(picked, ["geval_faithfulness", "geval_coverage"])
    assert len(lines) == 20 and all(x["score"] is None and x["scale"] == "1-5" for x in lines)
    assert "geval_faithfulness" not in json.dumps([{k: v for k, v in x.items()
                                                   if k != "dimension"} for x in lines])
    all_of_arag = page_answers(stratified_sample(recs, "geval_faithfulness", 40), ["d"])
    html = page(all_of_arag, "Label: <sweep>", "1-5", "labels.labelled.jsonl")
    assert "<script>alert" not in html and "<b>x</b>" not in html and "&lt;sweep&gt;" in html
    # the data is escaped text; the page's only scripts are its own (scale, file name, saving)
    assert html.count("<script") == 3 and "&lt;/script&gt;&lt;script&gt;alert(1)" in html


def test_a_sweep_with_a_bad_labels_file_stops_before_any_run(tmp_path):
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"task_id": "t1"}\n')
    done = forked.run([sys.executable, "run.py", "-m", "system=naive", "dataset=sample",
                      f"report.human_labels={bad}", *store_overrides(tmp_path),
                      f"hydra.sweep.dir={tmp_path}/multirun"], cwd=ROOT, timeout=300)
    assert done.returncode == 2
    assert f"{bad}:1: missing system, dimension, score, labeller. Fix:" in done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "artifacts").exists()


def test_label_sample_of_an_unknown_sweep_exits_2_with_the_fix(store, capsys):
    from labelling import main

    assert main(["no such sweep", "--tracking-uri", f"sqlite:///{store}/mlflow.db",
                 "--out", str(store / "never.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: label-sample='no such sweep': no sweep has that run id")
    assert "Fix:" in err and not (store / "never.jsonl").exists()


def _write_labels(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_labels_carry_their_scale_so_ones_out_of_five_are_not_read_as_yes_no(tmp_path):
    base = {"task_id": "t0", "system": "arag", "dimension": "geval_faithfulness",
            "labeller": "ana"}
    # four answers the judge gave 1 of 5, labelled 1 of 5 by a person, as the page saves them
    ones = [{**base, "task_id": f"t{k}", "scale": "1-5", "score": 1} for k in (0, 5, 10, 15)]
    read = read_labels_file(_write_labels(tmp_path / "ones.jsonl", ones))
    assert {x.scale for x in read} == {"1-5"}
    (found,) = human_agreement.compare(read, records(), ROWS).judge
    assert found.scale == "1-5" and found.threshold is None
    # a file without the scale: 1-5 unless every label is 0 or 1
    plain = [{**base, "task_id": "t1", "score": 2}, {**base, "task_id": "t2", "score": 1}]
    assert {x.scale for x in read_labels_file(_write_labels(tmp_path / "a.jsonl", plain))} \
        == {"1-5"}
    binary = [{**base, "task_id": "t1", "score": 0}, {**base, "task_id": "t2", "score": 1}]
    assert {x.scale for x in read_labels_file(_write_labels(tmp_path / "b.jsonl", binary))} \
        == {"yes/no"}
    # a score off the scale its line gives names the line
    with pytest.raises(LabelsError, match=r"b\.jsonl:1: score 0 is not on the 1-5 scale"):
        read_labels_file(_write_labels(tmp_path / "b.jsonl", [{**base, "scale": "1-5",
                                                               "score": 0}]))
    with pytest.raises(LabelsError, match=r":1: scale '1-10' is not one of 1-5, yes/no\. Fix"):
        read_labels_file(_write_labels(tmp_path / "b.jsonl", [{**base, "scale": "1-10",
                                                               "score": 3}]))
    # the template and the labelling page write the scale
    picked = stratified_sample({"arag": records()["r1"]}, "geval_faithfulness", 2)
    assert {x["scale"] for x in template_lines(picked, ["d"], "yes/no")} == {"yes/no"}
    saved = page(page_answers(picked, ["d"]), "t", "yes/no", "l.labelled.jsonl")
    assert "scale: scale," in saved and "id='scale'>\"yes/no\"</script>" in saved
    assert "<option value='0'>0 inconsistent</option>" in saved


def test_labels_on_a_field_no_judge_scored_are_refused_naming_the_judged_ones(tmp_path):
    labels = [label(f"t{k}", "arag", "rouge2_f1", 1 + k % 5) for k in range(4)]
    labels.append(label("t1", "arag", "geval_faithfulness", 3))
    with pytest.raises(LabelsError) as err:
        human_agreement.compare(labels, records(), ROWS)
    assert str(err.value).startswith("labels on `rouge2_f1` (arag/t0, arag/t1, arag/t2, arag/t3)"
                                     ": no judge scored that in this sweep")
    assert "Fix: label a dimension a judge scored: geval_coverage, geval_faithfulness" \
        in str(err.value)
    unjudged = [{k: v for k, v in r.items() if k not in JUDGED} for r in ROWS]
    with pytest.raises(LabelsError, match="none here .the sweep ran with no judge"):
        human_agreement.compare([label("t1", "arag", "geval_faithfulness", 3)], records(),
                                unjudged)


def test_a_labels_file_not_utf8_empty_a_folder_or_too_big_is_refused_with_the_fix(
        tmp_path, monkeypatch):
    line = json.dumps({"task_id": "t1", "system": "arag", "dimension": "geval_faithfulness",
                       "score": 4, "labeller": "ana"}) + "\n"
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(line.encode() + line.replace("ana", "Jos\xe9").encode("latin-1"))
    with pytest.raises(LabelsError) as err:
        read_labels_file(latin)
    at = len(line) + line.index("ana") + 3
    assert str(err.value).startswith(f"{latin}:2: byte {at} (0xe9) is not UTF-8. Fix: save "
                                     "the file as UTF-8 (e.g. iconv")
    for text in ("", "\n\n", line.replace("4", "null")):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(text)
        with pytest.raises(LabelsError, match="no labelled line .the file is empty, or every "
                                              "score is null.. Fix: fill in"):
            read_labels_file(empty)
    with pytest.raises(LabelsError, match="a folder. Fix"):
        read_labels_file(tmp_path)
    from tracking import human_labels

    monkeypatch.setattr(human_labels, "MAX_FILE_BYTES", 10)
    with pytest.raises(LabelsError, match=r"over the 0 MB a labels file may be\. Fix"):
        read_labels_file(latin)


def test_labels_of_unknown_systems_or_tasks_and_contradictions_are_left_out_by_line(
        tmp_path, caplog):
    base = {"dimension": "geval_faithfulness", "labeller": "ana", "scale": "1-5"}
    file = _write_labels(tmp_path / "labels.jsonl", [
        {**base, "task_id": "t1", "system": "arag", "score": 2},
        {**base, "task_id": "t1", "system": "agentic", "score": 3},  # no such run
        {**base, "task_id": "t404", "system": "naive", "score": 3},  # no such task
        {**base, "task_id": "t2", "system": "arag", "score": 3},
        {**base, "task_id": "t2", "system": "arag", "score": 5},  # contradicts line 4
        {**base, "task_id": "t1", "system": "arag", "score": 2},  # repeats line 1: kept once
        {**base, "task_id": "t3", "system": "arag", "score": 4}])
    found = human_agreement.compare(read_labels_file(file), records(), ROWS)
    assert found.left_out == [
        f"1 label(s) for a system that is not a run of this sweep (runs: arag, naive): {file}:2",
        f"1 label(s) for a task that system did not answer in this sweep: {file}:3",
        f"2 label(s) for ana gave arag/t2 `geval_faithfulness` the scores 3, 5 (Fix: keep "
        f"one): {file}:4, {file}:5"]
    assert found.judge[0].n == 2
    assert f"{file}:2" in caplog.text and "Labels left out:" in section_of(human_agreement.claims(found))
    nothing = _write_labels(tmp_path / "none.jsonl", [
        {**base, "task_id": "t1", "system": "agentic", "score": 3}])
    with pytest.raises(LabelsError, match="no label can be used: 1 label.s. for a system"):
        human_agreement.compare(read_labels_file(nothing), records(), ROWS)
    # feedback left on the traces never stops a report, even when none of it can be used
    feedback = HumanLabel("t1", "arag", "note", 3, "ana", "MLflow feedback")
    assert human_agreement.compare([feedback], records(), ROWS).left_out == [
        "1 label(s) for feedback on a field no judge scored: arag/t1"]


def test_the_labelling_page_shows_each_answer_once_with_rubric_source_and_trace():
    recs = {"arag": [{**r, "reference": f"reference of {r['id']} <i>", "context_chunk_ids":
                      ["doc1#L1-10", "doc1#L11-20"]} for r in records(4)["r1"]]}
    picked = stratified_sample(recs, "geval_faithfulness", 4)
    dims = ["geval_faithfulness", "geval_coverage"]
    traces = {("arag", rec["id"]): f"http://ui/#/traces/{rec['id']}" for _, rec in picked}
    long = "".join(f"line {k} of a stuffed filing & its notes\n" for k in range(2000))
    read = {("arag", picked[0][1]["id"]): Read([("doc1#L1-10", "Revenue was <b>$5</b> & up"),
                                                ("doc1", long)], ["a note"])}
    answers = page_answers(picked, dims, traces, read)
    assert len(answers) == 4 and all(a["dimensions"] == dims for a in answers)  # once each
    first = answers[0]
    assert first["trace"] == f"http://ui/#/traces/{first['task_id']}"
    assert first["reference"] == f"reference of {first['task_id']} <i>"
    # an answer whose text was not read back names the chunks it read, never silently none
    assert "2, doc1#L1-10, doc1#L11-20" in answers[1]["context"].notes[0]
    rubric = rubrics(dims)
    assert rubric["geval_faithfulness"]["against"] == "context"
    assert rubric["geval_coverage"]["against"] == "reference"
    assert rubric["geval_coverage"]["definition"].startswith("Coverage (1-5)")
    html = page(answers, "Label", "1-5", labelled_name("labels.jsonl"))
    assert html.count(f">{first['answer']}</pre>") == 1  # one answer, both dimensions
    assert html.count(f"data-task='{first['task_id']}'") == 2
    # the sources as escaped text, one collapsible block each, the long one cut saying so
    assert "Revenue was &lt;b&gt;$5&lt;/b&gt; &amp; up" in html and "<b>$5" not in html
    assert f"reference of {first['task_id']} &lt;i&gt;" in html
    assert "<summary>doc1#L1-10 (5 words)</summary>" in html
    assert html.count("line 1999 of a stuffed filing") == 0
    shown = html.split("<summary>doc1 (", 1)[1]
    cut = int(shown.split("Cut here: ", 1)[1].split(" more words", 1)[0].replace(",", ""))
    kept = shown.split("</pre>", 1)[0].count("of a stuffed filing")
    assert kept > 100 and cut == 9 * (2000 - kept)  # 9 words a line: every word accounted for
    assert "Faithfulness (1-5)" in html and "http://ui/#/traces/" in html
    # the page saves beside the template, never over it
    assert labelled_name("labels.jsonl") == "labels.labelled.jsonl"
    assert labelled_name("out/sample.jsonl") == "sample.labelled.jsonl"
    assert '"labels.labelled.jsonl"' in html and "link.download = saveAs" in html


def test_label_html_shows_the_text_a_stored_run_read_escaped(store, tmp_path):
    """label-sample --html on a stored sweep: the naive run's page holds the text of the
    chunk it read (rebuilt from the run's config.yaml and dataset), escaped; stuffing's,
    its whole document; coverage, the reference."""
    import mlflow
    from mlflow import MlflowClient
    from omegaconf import OmegaConf

    from arag.datasets.base import load_dataset
    from arag.retrieval.chunking import chunk_document
    from labelling import main as label_sample
    from tests.conftest import compose_cfg, write_mini_dataset

    root = write_mini_dataset(tmp_path / "mini", n_docs=1, filler=6)
    doc = root / "documents" / "T0X_q3_2024.txt"
    doc.write_text(doc.read_text().replace("region 2 and", "region <b>2</b> & R&D and"))
    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    exp = client.create_experiment("label-page", artifact_location=(tmp_path / "a").as_uri())
    parent = client.create_run(exp, run_name="sweep label-page",
                               tags={"role": "sweep_parent"}).info.run_id
    client.set_terminated(parent)
    chunks = {}
    for system in ("naive", "stuffing"):
        cfg = compose_cfg(["dataset=sample", f"dataset.root={root}", f"system={system}",
                           "retrieval.chunk_size=20"])
        task = load_dataset(cfg.dataset, ROOT).tasks[0]
        chunks = {c.chunk_id: c.text for c in chunk_document(
            load_dataset(cfg.dataset, ROOT).corpus.documents[task.doc_ids[0]], 20, 0)}
        read = [c for c, text in chunks.items() if "R&D" in text]
        pred = {"id": task.id, "source": "sample", "system": system, "model": "offline",
                "task_type": task.task_type, "question": task.question,
                "doc_ids": list(task.doc_ids), "ground_truth": task.reference,
                "predicted": f"{system} says revenue rose", "not_recorded": [],
                "context_chunk_ids": read if system == "naive" else []}
        run = client.create_run(exp, run_name=system, tags={
            "mlflow.parentRunId": parent, "run_label": system, "system": system}).info.run_id
        folder = tmp_path / system
        folder.mkdir()
        (folder / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        (folder / "predictions.jsonl").write_text(json.dumps(pred) + "\n")
        (folder / "predictions.eval.jsonl").write_text(json.dumps(
            {"id": task.id, "geval_faithfulness": 4, "geval_coverage": 3}) + "\n")
        for name in ("config.yaml", "predictions.jsonl", "predictions.eval.jsonl"):
            client.log_artifact(run, str(folder / name))
        client.set_terminated(run)
    out = tmp_path / "label.html"
    try:
        assert label_sample([parent, "--out", str(tmp_path / "labels.jsonl"), "--html",
                             str(out), "--tracking-uri", f"sqlite:///{store}/mlflow.db"]) == 0
    finally:
        mlflow.set_tracking_uri(None)
    html = out.read_text()
    (read_chunk,) = read
    assert "R&D" in chunks[read_chunk] and "R&D" not in html  # never as raw markup
    naive, stuffing = (html.split(f"{s} / T0X_q3_2024</h3>", 1)[1].split("<section>")[0]
                       for s in ("naive", "stuffing"))
    assert f"<summary>{read_chunk} (" in naive
    assert html_escape(chunks[read_chunk]) in naive  # the chunk's own text, not only its id
    assert "The context the system read: 1 source(s)" in naive
    # stuffing read the whole document: it is shown, every line of it
    assert "<summary>T0X_q3_2024 (" in stuffing
    assert html_escape(doc.read_text().strip()) in stuffing
    assert "q3 revenue rose 8.0 percent" in naive and "q3 revenue rose 8.0 percent" in stuffing
