"""Read a learner's typed answer: shapes, yes/no, whole numbers (no torch).

>>> parse_shape("[2, 8, 6, 64]"), parse_shape("(2,8,6,64)"), parse_shape("2x8x6x64")
((2, 8, 6, 64), (2, 8, 6, 64), (2, 8, 6, 64))
>>> parse_shape("torch.Size([3])"), parse_shape("()")
((3,), ())
>>> parse_bool("Yes"), parse_bool("n"), parse_bool("maybe")
(True, False, None)
>>> parse_int("1,536 bytes"), parse_int("1.5 KiB"), parse_int("-")
(1536, 1536, None)
"""

from __future__ import annotations

import math
import re

from shapetrace.engine.dims import whole_number

_TRUE = {"y", "yes", "true", "t", "1", "raises", "raise", "error"}
_FALSE = {"n", "no", "false", "f", "0", "ok", "none"}
_UNITS = {"": 1, "b": 1, "byte": 1, "bytes": 1, "kib": 1024, "kb": 1024, "mib": 1 << 20, "mb": 1 << 20}


def parse_shape(text: str) -> tuple[int, ...] | None:
    """A tuple of sizes from ``[2, 8, 6, 64]``, ``(2,8,6,64)``, ``2x8x6x64`` or ``torch.Size([..])``."""
    t = text.strip().lower().replace("torch.size", "")
    t = t.strip("()[] \t")
    if not t:
        return ()
    parts = [p for p in re.split(r"[\s,x×*]+", t.strip("()[] ")) if p]
    if not parts or not all(whole_number(p) for p in parts):
        return None
    return tuple(int(p) for p in parts)


def parse_bool(text: str) -> bool | None:
    t = text.strip().lower().rstrip(".!")
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    return None


def parse_int(text: str) -> int | None:
    m = re.fullmatch(r"\s*(-?[\d_,]*\.?\d+)\s*([a-zA-Z]*)\s*", text)
    if not m:
        return None
    unit = _UNITS.get(m.group(2).lower())
    if unit is None:
        return None
    value = float(m.group(1).replace(",", "").replace("_", "")) * unit
    if not math.isfinite(value):  # (400 digits read as a float are inf, which int() refuses)
        return None
    return int(value) if value == int(value) else None


PARSERS = {"shape": parse_shape, "strides": parse_shape, "contiguous": parse_bool, "raises": parse_bool,
           "is-view": parse_bool, "copy-bytes": parse_int, "value": parse_int}
#: Format examples: a size of 1 between two odd sizes, which no question's answer is (a test checks the bank).
EXAMPLE_SHAPE = (5, 1, 7)
EXAMPLE_STRIDES = (7, 7, 1)
HOW = {"shape": "a shape written like [5, 1, 7], (5,1,7) or 5x1x7",
       "strides": "strides written like (7, 7, 1)", "contiguous": "yes or no",
       "raises": "yes or no", "is-view": "yes or no", "copy-bytes": "a whole number of bytes",
       "value": "a whole number"}


def check_answer(kind: str, typed: str, expected) -> tuple[bool, bool]:
    """``(understood, right)`` for a typed answer against the expected value."""
    parsed = PARSERS[kind](typed)
    if parsed is None:
        return False, False
    if kind in ("shape", "strides"):
        return True, tuple(parsed) == tuple(expected)
    return True, parsed == expected


def show_answer(kind: str, value) -> str:
    if kind in ("shape", "strides"):
        return "[" + ", ".join(str(v) for v in value) + "]" if kind == "shape" else \
            "(" + ", ".join(str(v) for v in value) + ")"
    if kind in ("contiguous", "raises", "is-view"):
        return "yes" if value else "no"
    if kind == "copy-bytes":
        return f"{value:,} bytes"
    return f"{value:,}"
