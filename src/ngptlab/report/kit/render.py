"""Render a Document to markdown (figures linked from figures/) and to one self-contained HTML file (figures
inlined as data: URIs, CSS inline, no script, nothing fetched): the same blocks, the same numbering.

Anchors: sections use their Heading.anchor; figures fig-<id>; tables table-<id>; the provenance table's rows
run-<run name>, which every other table's "runs" cell links to.
"""

from __future__ import annotations

import base64
import html
import re

from ngptlab.report.kit.document import (
    Bullets,
    Callout,
    Contents,
    Document,
    FigureBlock,
    Heading,
    TableBlock,
    Text,
)

INLINE = re.compile(r"\*\*(?P<bold>.+?)\*\*|`(?P<code>[^`]+)`|\[(?P<label>[^\]]+)\]\((?P<href>[^)\s]+)\)")


def run_anchor(run: str) -> str:
    return f"run-{run}"


def _numbering(doc: Document) -> tuple[dict[str, int], dict[str, int]]:
    figures = {f.id: i + 1 for i, f in enumerate(doc.figures)}
    tables = {t.id: i + 1 for i, t in enumerate(doc.tables)}
    return figures, tables


# ----------------------------------------------------------------------------------------------------------
# Markdown


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document) -> str:
    fig_no, tab_no = _numbering(doc)
    out = [f"# {doc.title}", ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out += [f'<a id="{block.anchor}"></a>', "", f"{'#' * block.level} {block.text}", ""]
        elif isinstance(block, Text):
            out += [block.text, ""]
        elif isinstance(block, Bullets):
            out += [f"- {item}" for item in block.items] + [""]
        elif isinstance(block, Callout):
            out += [f"> **{'Warning' if block.kind == 'warning' else 'Note'}:** {block.text}", ""]
        elif isinstance(block, Contents):
            for h in doc.headings:
                indent = "  " * (h.level - 2)
                out.append(f"{indent}- [{h.text}](#{h.anchor})")
            out.append("")
        elif isinstance(block, FigureBlock):
            f = block.figure
            out += [f'<a id="fig-{f.id}"></a>', "", f"![{f.title}](figures/{f.id}.svg)", "",
                    f"*Figure {fig_no[f.id]}. {f.title}.* {f.caption}", ""]
        elif isinstance(block, TableBlock):
            t = block.table
            cols = t.shown_columns()
            out += [f'<a id="table-{t.id}"></a>', "",
                    f"**Table {tab_no[t.id]}. {t.title}** ([CSV](tables/{t.id}.csv))", ""]
            out.append("| " + " | ".join(_md_cell(t.header(c)) for c in cols) + " |")
            out.append("|" + "|".join("---" for _ in cols) + "|")
            for row in t.rows:
                out.append("| " + " | ".join(_md_cell(t.display(row, c)) for c in cols) + " |")
            out.append("")
            if t.full_note():
                out += [f"*{t.full_note()}*", ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------------------------------
# HTML

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "DejaVu Sans", sans-serif; color: #1b1b1b; background: #fff;
       margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem 2rem 4rem; }
h1 { font-size: 1.7rem; margin-bottom: .3rem; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.4rem; }
h3 { margin-top: 1.8rem; }
code { font: .88em ui-monospace, "DejaVu Sans Mono", monospace; background: #f3f3f3; padding: 0 .2em; }
nav.contents { background: #f7f7f9; border: 1px solid #e3e3e8; padding: .6rem 1.2rem; display: inline-block; }
nav.contents ol { margin: .2rem 0; padding-left: 1.2rem; }
.callout { border-left: 4px solid #c77700; background: #fff6e5; padding: .6rem 1rem; margin: 1rem 0; }
.callout.note { border-color: #2b6cb0; background: #eef5fc; }
figure { margin: 1.5rem 0; }
figure img { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9rem; color: #333; margin-top: .3rem; }
.table-wrap { overflow-x: auto; margin: 1.2rem 0; }
table { border-collapse: collapse; font-size: .85rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border: 1px solid #d6d6d6; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f4; }
tbody tr:nth-child(even) { background: #fafafa; }
tr:target { background: #fff3b0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
details summary { cursor: pointer; color: #2b6cb0; }
details a { display: block; white-space: nowrap; font-size: .8rem; }
p.note { font-size: .85rem; color: #444; margin-top: .2rem; }
"""


def inline_html(text: str) -> str:
    """Escape text and turn the inline markup (**bold**, `code`, [text](href)) into HTML."""
    out, pos = [], 0
    for m in INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        if m.group("bold") is not None:
            out.append(f"<strong>{inline_html(m.group('bold'))}</strong>")
        elif m.group("code") is not None:
            out.append(f"<code>{html.escape(m.group('code'))}</code>")
        else:
            href, label = html.escape(m.group("href"), quote=True), html.escape(m.group("label"))
            out.append(f'<a href="{href}">{label}</a>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"[<>~]?-?[0-9][0-9,.]*(e-?[0-9]+)?|∞|—", text))


def _runs_cell(runs: list[str]) -> str:
    if not runs:
        return "—"
    links = "".join(f'<a href="#{run_anchor(r)}">{html.escape(r)}</a>' for r in runs)
    return f"<details><summary>{len(runs)}</summary>{links}</details>"


def _table_html(block: TableBlock, number: int) -> str:
    t = block.table
    cols = t.shown_columns()
    is_provenance = not block.link_runs
    head = "".join(f"<th>{html.escape(t.header(c))}</th>" for c in cols)
    if block.link_runs:
        head += "<th>runs</th>"
    shown = [[t.display(row, c) for c in cols] for row in t.rows]
    # A column of numbers is right-aligned, as a whole: a digit string among words stays left
    numeric = [any(r[j] != "—" for r in shown) and all(_is_number(r[j]) for r in shown)
               for j in range(len(cols))]
    body = []
    for i, texts in enumerate(shown):
        cells = []
        for j, text in enumerate(texts):
            cls = ' class="num"' if numeric[j] else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        if block.link_runs:
            cells.append(f"<td>{_runs_cell(t.runs[i])}</td>")
        row_id = f' id="{run_anchor(t.runs[i][0])}"' if is_provenance and t.runs[i] else ""
        body.append(f"<tr{row_id}>{''.join(cells)}</tr>")
    note = f'<p class="note">{inline_html(t.full_note())}</p>' if t.full_note() else ""
    return (f'<div class="table-wrap" id="table-{t.id}"><table><caption>Table {number}. '
            f'{html.escape(t.title)} (<a href="tables/{t.id}.csv">CSV</a>)</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}</div>")


def _figure_html(block: FigureBlock, number: int) -> str:
    f = block.figure
    data = base64.b64encode(f.svg).decode("ascii")
    return (f'<figure id="fig-{f.id}">'
            f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(f.title)}">'
            f"<figcaption><strong>Figure {number}. {html.escape(f.title)}.</strong> {inline_html(f.caption)} "
            f"{_runs_cell(f.runs)}</figcaption></figure>")


def to_html(doc: Document) -> str:
    fig_no, tab_no = _numbering(doc)
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(doc.title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
             "<main>",
             f'<h1 id="top">{html.escape(doc.title)}</h1>']
    for block in doc.blocks:
        if isinstance(block, Heading):
            parts.append(f'<h{block.level} id="{block.anchor}">{inline_html(block.text)}</h{block.level}>')
        elif isinstance(block, Text):
            parts.append(f"<p>{inline_html(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Callout):
            label = "Warning" if block.kind == "warning" else "Note"
            parts.append(f'<div class="callout {block.kind}"><strong>{label}:</strong> '
                         f"{inline_html(block.text)}</div>")
        elif isinstance(block, Contents):
            parts.append(_contents_html(doc))
        elif isinstance(block, FigureBlock):
            parts.append(_figure_html(block, fig_no[block.figure.id]))
        elif isinstance(block, TableBlock):
            parts.append(_table_html(block, tab_no[block.table.id]))
    parts += ["</main>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _contents_html(doc: Document) -> str:
    out, level = ['<nav class="contents" id="contents"><strong>Contents</strong><ol>'], 2
    for h in doc.headings:
        if h.level > level:
            out.append("<ol>")
        elif h.level < level:
            out.append("</li>" + "</ol></li>" * (level - h.level))
        elif len(out) > 1:
            out.append("</li>")
        out.append(f'<li><a href="#{h.anchor}">{inline_html(h.text)}</a>')
        level = h.level
    out.append("</li>" + "</ol></li>" * (level - 2) + "</ol></nav>")
    return "".join(out)
