"""Word wrap that never splits a number from its unit, a tuple or a shape, and leaves no word alone.

Plain strings in, plain strings out; the table and the headers style the lines afterwards.

>>> wrap("copies 6,144 elements (24 KiB) into strides (3072, 384, 64, 1)", 32)
['copies 6,144 elements (24 KiB)', 'into strides (3072, 384, 64, 1)']
>>> wrap("a new buffer 24 KiB", 16)
['a new', 'buffer 24 KiB']
"""

from __future__ import annotations

import re

#: Spans kept on one line: tuples ``(3072, 64, 1)``, shapes ``[B, H, T, d_k]``, a number with its unit,
#: ``a × b`` products, ``q @ kᵀ``, a call ``name(x, "B T D")``.
_ATOM = re.compile(r"\(\s*[^\s(),]+(?:,\s*[^\s(),]+){0,12}\)|\[[^\[\]\n]{0,60}\]"
                   r"|\d[\d,.]*\s(?:B|KiB|MiB|GiB|TiB|elements?)\b|\w+\s[×x@]\s\w+ᵀ?|[\w.]+\([^()\n]{0,40}\)")
_GLUE = "\x00"


def _words(text: str, width: int | None = None) -> list[str]:
    glued = _ATOM.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    words = [w.replace(_GLUE, " ") for w in glued.split()]
    if width is None:
        return words
    return [piece for w in words for piece in _split_long(w, width)]


def _split_long(word: str, width: int) -> list[str]:
    """A span wider than the whole line (a long shape on a narrow terminal) split after its commas,
    and only as a last resort inside a word."""
    if len(word) <= width:
        return [word]
    pieces: list[str] = []
    for part in word.replace(", ", ",\x00").split("\x00"):
        if pieces and len(pieces[-1] + " " + part) <= width:
            pieces[-1] += " " + part
        else:
            pieces.extend(part[i:i + width] for i in range(0, len(part), width))
    return pieces


def greedy_rows(items: list, fits) -> list[list]:
    """``items`` in rows, each as full as ``fits(row)`` allows; the last row never holds a single item
    where the row above can give it its last one (a lone short word, a lone ``contiguous``)."""
    rows: list[list] = []
    for item in items:
        if rows and fits(rows[-1] + [item]):
            rows[-1].append(item)
        else:
            rows.append([item])
    if len(rows) >= 2 and len(rows[-1]) == 1 and len(rows[-2]) > 1 and fits([rows[-2][-1], *rows[-1]]):
        rows[-1].insert(0, rows[-2].pop())
    return rows


def wrap(text: str, width: int) -> list[str]:
    """Greedy wrap at ``width`` over unbreakable spans; the last line never holds a single short word."""
    width = max(1, width)
    lines = greedy_rows(list(_words(text, width)), lambda words: len(" ".join(words)) <= width)
    return [" ".join(words) for words in lines] or [""]


def wrap_parts(text: str, width: int, sep: str = " · ") -> list[str]:
    """A header line wrapped at its `` · `` separators first, then by words."""
    if len(text) <= width:
        return [text]
    out: list[str] = []
    for part in text.split(sep):
        if out and len(out[-1] + sep + part) <= width:
            out[-1] += sep + part
        else:
            out.extend(wrap(part, width))
    return out


def glued(text: str) -> str:
    """Shapes and tuples kept whole when a line wraps: no break after a comma inside [...] or (...).

    Only a bracket that is closed glues: a label cut short (``key_states.transpose(2,…``) leaves its
    ``(`` open, and the rest of the line must still wrap."""
    inside = [False] * len(text)
    opened: list[int] = []
    for i, ch in enumerate(text):
        if ch in "[(":
            opened.append(i)
        elif ch in "])" and opened:
            start = opened.pop()
            for k in range(start, i):
                inside[k] = True
    return "".join("\u00a0" if ch == " " and inside[i] else ch for i, ch in enumerate(text))
