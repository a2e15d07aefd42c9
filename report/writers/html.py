"""report.md as HTML and as text MLflow shows: plots inlined, no HTML from the data, and
sections added to report.md after it was written (a baseline comparison) brought over."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from report.writers.markdown import inert

_IMAGE = re.compile(r"!\[([^\]]*)\]\((plots/[^)\s]+)\)")
_ADDED = re.compile(r"<section class='added'>.*?</section>", re.S)
STYLE = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
         "padding:3px 6px}img{max-width:100%}pre{background:#f6f6f6;padding:.6em;"
         "white-space:pre-wrap;overflow-wrap:anywhere}code{overflow-wrap:anywhere}"
         ".scroll{overflow-x:auto;max-width:100%;margin:.5em 0}")


def readable_markdown(markdown_text: str, made: set[str]) -> str:
    """``report.md`` as text: MLflow shows Markdown artifacts verbatim, so an image link
    becomes a line naming the plot file (report.html shows it inline); a plot that was not
    drawn is left out; no text from the data can open an HTML tag (``markdown.inert``)."""
    def line(match: re.Match[str]) -> str:
        alt, path = match.group(1), match.group(2)
        return f"(plot: {alt}, `{path}` in this run's artifacts)" if path in made else ""

    return inert(_IMAGE.sub(line, markdown_text))  # data never becomes markup


def html_body(markdown_text: str) -> str:
    """Report Markdown as HTML, with no HTML of its own: every text from a dataset, a model
    or a judge is shown as text, never run; a wide table scrolls in its own box, not the
    page (MLflow's viewer is a narrow frame)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    return body.replace("<table>", "<div class='scroll'><table>").replace(
        "</table>", "</table></div>")


def to_html(markdown_text: str, title: str, plot_dir: Path | None = None) -> str:
    """A self-contained page: plots inlined as data URIs (MLflow shows HTML artifacts in a
    sandboxed frame where relative paths lead nowhere); a plot not drawn is left out."""
    def inline(match: re.Match[str]) -> str:
        path = plot_dir / match.group(1) if plot_dir else None
        if path is None or not path.exists():
            return ""
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}"{match.group(2)}'

    body = re.sub(r'<img src="plots/([^"/]+)"([^>]*>)', inline, html_body(markdown_text))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{STYLE}</style></head><body>{body}</body></html>")


def with_added_sections(report_md: str, report_html: str) -> str:
    """``report.html`` with every section of ``report.md`` it lacks (one added to report.md
    after the report was written, as the baseline comparison's "Against the baseline"),
    rendered as the rest; sections added earlier are replaced, so a later comparison's
    section is the one shown."""
    page = _ADDED.sub("", report_html)
    added = [f"<section class='added'>{html_body(part)}</section>"
             for part in re.split(r"(?m)^(?=## )", report_md) if part.startswith("## ")
             and html_body(part.splitlines()[0]).strip() not in page]
    return page.replace("</body>", "".join(added) + "</body>", 1)
