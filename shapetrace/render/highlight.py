"""Syntax colours for one line of Python, with the stdlib tokenizer (no pygments import)."""

from __future__ import annotations

import io
import keyword
import tokenize

from rich.text import Text

STYLES = {"keyword": "bold blue", "string": "green", "number": "cyan", "comment": "dim", "call": "yellow"}


def highlight_line(code: str) -> Text:
    """``code`` as a Rich Text with keywords, strings, numbers, calls and comments coloured."""
    text = Text(code)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text
    for tok, nxt in zip(tokens, tokens[1:] + tokens[-1:]):
        style = _style(tok, nxt)
        if style and tok.start[0] == 1:
            end = tok.end[1] if tok.end[0] == 1 else len(code)
            text.stylize(style, tok.start[1], end)
    return text


def _style(tok: tokenize.TokenInfo, nxt: tokenize.TokenInfo) -> str | None:
    if tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
        return STYLES["keyword"]
    if tok.type == tokenize.NAME and nxt.string == "(":
        return STYLES["call"]
    if tok.type == tokenize.STRING:
        return STYLES["string"]
    if tok.type == tokenize.NUMBER:
        return STYLES["number"]
    if tok.type == tokenize.COMMENT:
        return STYLES["comment"]
    return None
