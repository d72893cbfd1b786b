"""Write a trace to a file for slides and handouts: .svg, .html, .md or .txt.

SVG, HTML and text come from Rich's recording console, so they show exactly the
table printed in the terminal (colours included); Markdown is a real table for
course notes. ``light`` suits projectors and white paper, ``dark`` a terminal look.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import CONSOLE_HTML_FORMAT, Console

from shapetrace.app.classroom import THEMES, ViewOptions, names_for, spell_long
from shapetrace.app.exportpath import check_export_path, export_format, write_atomically
from shapetrace.app.operands import equation, is_matmul
from shapetrace.engine.formatting import fmt_shape
from shapetrace.engine.sentences import annotate, memory_word
from shapetrace.errors import RunError, UsageError
from shapetrace.render.backward import BackwardView
from shapetrace.render.classroom import ClassroomView
from shapetrace.render.table import (
    LAYOUT_WORDS,
    SETUP_TITLE,
    SEVERITY_MARK,
    footer_text,
    setup_fold_sentence,
    setup_label,
    trace_header,
    verdict_text,
)
from shapetrace.render.themes import LIGHT_THEME, TERMINAL_THEMES, readable_segments  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report

EXPORT_WIDTH = 100




def check_theme(theme: str) -> str:
    if theme not in THEMES:
        raise UsageError(f"--theme {theme!r}: choose one of {', '.join(THEMES)}")
    return theme


def recording_console(width: int) -> Console:
    """A console that records everything printed, in full colour, at a fixed width."""
    return Console(record=True, file=io.StringIO(), width=width, force_terminal=True,
                   color_system="truecolor", legacy_windows=False)


#: Monospace fonts a classroom machine has (Rich's SVG sets every run's width, so any of them lines up).
SYSTEM_MONO = '"DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace'


def offline_svg(svg: str) -> str:
    """Rich's SVG without its web font: no ``@font-face`` fetched from a CDN, the system's monospace instead
    (an offline classroom has no network, and a projector laptop may allow none)."""
    svg = re.sub(r"@font-face\s*\{[^}]*\}\s*", "", svg)
    return re.sub(r"font-family:\s*Fira Code,\s*monospace;", f"font-family: {SYSTEM_MONO};", svg)


def render_export(trace: Report, fmt: str, options: ViewOptions = ViewOptions(),
                  theme: str = "light", static: bool = False, doubled=None) -> str:
    """The text of an export in format ``fmt`` (one of :data:`FORMATS`).

    ``.html`` is the interactive classroom page (:mod:`shapetrace.render.page`) unless ``static``,
    which writes the table exactly as printed (like ``.svg``, for slides). A traced backward follows the
    forward in every format, folded as the table is (``doubled``: the same model's at 2T, for its summary).
    """
    if fmt == ".md":
        return markdown(trace, options, doubled)
    if fmt == ".html" and not static:
        from shapetrace.render.page import interactive_page

        return interactive_page(trace, options, theme, doubled)

    console = recording_console(options.width or EXPORT_WIDTH)
    console.print(readable_segments(console, ClassroomView(trace, options), theme))
    if getattr(trace, "backward", None) is not None:
        console.print()
        console.print(readable_segments(console, BackwardView.of(trace, options, doubled), theme))
    if fmt == ".txt":
        return console.export_text()
    title = trace_header(trace)[0] if trace_header(trace) else "shapetrace"
    if fmt == ".svg":
        return offline_svg(console.export_svg(title=title, theme=TERMINAL_THEMES[theme]))
    return console.export_html(theme=TERMINAL_THEMES[theme], code_format=html_format(title))


def html_format(title: str) -> str:
    """Rich's HTML page with a <title> (braces escaped for str.format)."""
    from html import escape


    safe = escape(title).replace("{", "{{").replace("}", "}}")
    return CONSOLE_HTML_FORMAT.replace('<meta charset="UTF-8">', f'<meta charset="UTF-8">\n<title>{safe}</title>', 1)


def export_trace(trace: Report, path: str | Path, options: ViewOptions = ViewOptions(),
                 theme: str = "light", force: bool = False, static: bool = False, doubled=None) -> Path:
    """Write the trace to ``path`` in the format its suffix names, atomically; returns the path.

    Raises:
        UsageError: an unknown format or theme, a missing folder, or an existing path without ``force``.
        RunError: the file system refused the write.
    """
    path = check_export_path(path, force)
    text = render_export(trace, export_format(path), options, check_theme(theme), static, doubled)
    try:
        write_atomically(path, text, force)
    except OSError as exc:
        raise RunError(f"--export {path}: cannot write the file ({exc.strerror or exc})") from exc
    return path


# -- Markdown -------------------------------------------------------------------------------

MD_COLUMNS = ("#", "op", "code", "shape [names]", "strides", "memory", "layout", "annotation")


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _md_code(code: str) -> str:
    code = code.split("  #")[0].strip()
    fence = "``" if "`" in code else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{_md_cell(code)}{pad}{fence}"


def md_memory(e: Event) -> str:
    """The memory column in words: view, no-op, copy N, new N."""
    word = memory_word(e)
    return f"**{word}**" if e.copy_bytes and not (e.view or e.noop or e.error) else word


def md_row(e: Event, explain: str = "full", long_names=None) -> str:
    """One Markdown table row for an op."""
    o = e.output
    shape = fmt_shape(o, long_names) if o else ""
    strides = "(" + ", ".join(map(str, o.stride)) + ")" if o else ""
    layout = LAYOUT_WORDS[o.contiguous] if o else ""
    note = spell_long(annotate(e, explain), long_names)
    if is_matmul(e):
        note = f"`{equation(e)}`; {note}"
    cells = [str(e.index), f"`{e.op}`", _md_code(e.code), _md_cell(shape), strides, md_memory(e), layout,
             _md_cell(note)]
    return "| " + " | ".join(cells) + " |"


def markdown(trace: Report, options: ViewOptions = ViewOptions(), doubled=None) -> str:
    """The trace as Markdown: header, one table row per op, footer and diagnostics; then the backward,
    when it was traced (:func:`~shapetrace.render.markdown_backward.md_backward`)."""
    long_names = names_for(trace, options)
    header = trace_header(trace)
    lines = [f"### {header[0]}", ""] if header else []
    lines += [f"{_md_cell(h)}  " for h in header[1:]]
    lines += ["", "| " + " | ".join(MD_COLUMNS) + " |",
              "|" + "|".join(["---:"] + ["---"] * (len(MD_COLUMNS) - 1)) + "|"]
    lines += md_setup_rows(trace, options, long_names)
    lines += [md_row(e, options.explain, long_names) for e in trace.events]
    lines += ["", "strided: a view whose strides are not row-major (normal after a transpose; not an error).", ""]
    lines += [f"{line}  " for line in footer_text(trace, trace.events, setup_shown=True).plain.splitlines()]
    lines += [""] + md_diagnostics(trace)
    if getattr(trace, "backward", None) is not None:
        from shapetrace.render.markdown_backward import md_backward

        lines += ["", *md_backward(trace, options, doubled)]
    return "\n".join(lines).rstrip() + "\n"


def md_setup_rows(trace: Report, options: ViewOptions, long_names=None) -> list[str]:
    """The ops that built the model, at the top of the table as the terminal shows them: one folded row
    (``| 0-1 | setup | ... | 2 ops ran while the model was built ... |``), or with ``--all`` a title row
    and a row each."""
    setup = list(getattr(trace, "setup", None) or ())
    if not setup:
        return []
    empty = [""] * (len(MD_COLUMNS) - 3)
    if options.fold:
        return ["| " + " | ".join([setup_label(setup), "setup", *empty, _md_cell(setup_fold_sentence(setup))]) + " |"]
    title = "| " + " | ".join(["", "**setup**", *empty, _md_cell(SETUP_TITLE)]) + " |"
    return [title, *(md_row(e, options.explain, long_names) for e in setup)]


def md_diagnostics(trace: Report) -> list[str]:
    """The errors and warnings as a Markdown list, the one verdict line (bold), then the notes."""
    found = [d for d in trace.diagnostics if d.severity != "note"]
    notes = [d for d in trace.diagnostics if d.severity == "note"]
    out = ["**Diagnostics**", ""] + [_md_finding(d) for d in found] + [""] if found else []
    out.append(f"**{_md_cell(verdict_text(trace))}**")
    return out + ([""] + [_md_finding(d) for d in notes] if notes else [])


def _md_finding(d) -> str:
    where = f" at #{d.event}" if d.event is not None else ""
    return f"- **{SEVERITY_MARK[d.severity]}** `{d.kind}`{where}: {_md_cell(d.text)}"

