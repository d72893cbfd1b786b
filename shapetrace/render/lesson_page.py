"""``shapetrace lesson N --export lesson.html``: one lesson as a self-contained page.

The prose goes through markdown-it (raw HTML in a lesson is escaped, never passed on); each live
example shows its code, then its traced table exactly as the terminal prints it (Rich's recording
console, colours inline), the memory diagram asked for by ``diagram=N``, the bug an ``expect=``
example is there to show, and for a ``predict=`` example the question first and the answer folded
under a "show the answer" button. No script, no network, no external font.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt
from rich.console import Console

from shapetrace.render.lessons import answer_line, expected_words, traced_parts
from shapetrace.render.themes import TERMINAL_THEMES

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.lessons import LessonBlock

TABLE_WIDTH = 100

STYLE = """
body { font: 18px/1.5 system-ui, sans-serif; max-width: 62em; margin: 2em auto; padding: 0 1em;
       background: #fdfdfd; color: #1b1b1b; }
pre, code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 15px; }
pre.code { background: #f2f2f2; border-left: 4px solid #0072B2; padding: .6em 1em; overflow-x: auto; }
div.trace pre { margin: 0; overflow-x: auto; }
p.predict { color: #8a1f8a; font-weight: bold; }
p.bug { color: #b00020; font-weight: bold; }
p.missed { color: #b00020; }
details.answer { margin: .5em 0 1.5em; }
details.answer summary { cursor: pointer; color: #8a1f8a; font-weight: bold; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .2em .6em; }
"""


def lesson_page(number: int, title: str, blocks: Sequence[LessonBlock], theme: str = "light") -> str:
    """The whole page of lesson ``number``."""
    body = "\n".join(block_html(block, theme) for block in blocks)
    head = escape(f"shapetrace lesson {number} · {title}")
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"UTF-8\">\n<title>{head}</title>\n"
            f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def block_html(block: LessonBlock, theme: str) -> str:
    """One block: prose as HTML, or a live example with its trace."""
    if block.kind == "text":
        return markdown_html(block.body)
    parts = []
    if block.predict:
        parts.append(f"<p class=\"predict\">predict: what is the shape of <code>{escape(block.predict)}</code>? "
                     "Work it out before you open the trace.</p>")
    if block.expect:
        parts.append(f"<p class=\"bug\">a bug, on purpose: {escape(expected_words(block.expect))}</p>")
    parts.append(f"<pre class=\"code\">{escape(block.body.rstrip())}</pre>")
    if block.trace is None:
        return "\n".join(parts)
    trace = f"<div class=\"trace\">{trace_html(block, theme)}</div>"
    if block.predict and block.answer is not None:
        answer = escape(answer_line(block).plain)
        parts.append(f"<details class=\"answer\"><summary>show the trace and the answer</summary>\n{trace}\n"
                     f"<p class=\"predict\">{answer}</p></details>")
    else:
        parts.append(trace)
    if block.expect_met is False:
        parts.append(f"<p class=\"missed\">shapetrace did not show the {escape(block.expect or '')} this example "
                     "is meant to show: please report it</p>")
    return "\n".join(parts)


def trace_html(block: LessonBlock, theme: str) -> str:
    """The traced table of an example, as the terminal prints it, in a <pre> with inline colours."""
    console = Console(record=True, file=io.StringIO(), width=TABLE_WIDTH, force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    for part in traced_parts(block):
        console.print(part)
    return console.export_html(theme=TERMINAL_THEMES[theme], inline_styles=True,
                              code_format='<pre style="color: {foreground}; background-color: {background}">'
                                          "{code}</pre>")


def markdown_html(text: str) -> str:
    """Lesson prose as HTML (CommonMark and tables; raw HTML escaped)."""

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
