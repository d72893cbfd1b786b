"""Learner data entering the parent: parsed within bounds, typed, and stripped of control characters.

No torch, no Rich. Everything a check's child sends (each frame's JSON header, the JSON part of each
message body, its standard error) and every name a grade reads from a student's folder came from
learner code or a learner's hands. It is read here, once, where it enters the parent:

* :func:`loads` parses JSON with a depth cap (a 4 KiB header of nested arrays is refused, never a
  ``RecursionError``) and passes every string through :func:`clean`;
* :func:`clean` is the one function that removes what a terminal, a table, a CSV or a JSON reader would
  act on instead of showing: escape sequences (clear screen, cursor moves, colours faking a green
  ``✓ pass``, OSC 8 hyperlinks, device controls), the other C0 and C1 controls (a carriage return, which
  would let a line overwrite itself, becomes a newline), bidirectional overrides
  and isolates, zero-width and other invisible format characters, line and paragraph separators (they
  become newlines) and lone surrogates (they become U+FFFD, which every encoder can write);
* :func:`checked_facts` refuses facts of a type the child never writes (an ``output_total`` that is a
  string, a diagnostic whose event is a list), so the judge reads only the types it was written for.

A refusal is :class:`Unreadable` (a ``ValueError``): the check's verdict is then ``crash``, the
learner's doing, never an internal error.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

#: The deepest nesting of JSON a child sends (a message's values and facts use about 10 levels).
MAX_DEPTH = 32

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"                   # CSI: colours, cursor moves, clear screen
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: titles, OSC 8 hyperlinks
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"    # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"                          # the other escapes (ESC c resets, ESC 7 saves the cursor)
    r"|\x9b[0-?]*[ -/]*[@-~]?"                    # 8-bit CSI
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"   # 8-bit OSC
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # 8-bit DCS, SOS, PM, APC
)
#: Controls and invisible format characters (tab and newline stay): a fast pass before the full one.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e"
                       "\u2060-\u206f\ufeff\ufff9-\ufffb]")
_SEPARATORS = re.compile("[\u2028\u2029]")
#: Unicode categories removed from text that is not plain ASCII: controls, format characters
#: (bidi overrides and isolates, zero-width characters, tags) and private use.
_DROPPED = {"Cc", "Cf", "Co"}


class Unreadable(ValueError):
    """Learner data that is not what the checker's child writes: too deep, not JSON, the wrong type."""


def clean(text: str) -> str:
    """``text`` with nothing a terminal, table or spreadsheet would act on: shown as it reads, inert.

    >>> clean("\\x1b[2J\\x1b[32m✓ pass\\x1b[0m \\x1b]8;;http://x\\x1b\\\\link\\x1b]8;;\\x1b\\\\ \\u202eevil\\rfail")
    '✓ pass link evil\\nfail'
    """
    if text.isascii() and text.isprintable():
        return text
    text = _SEQUENCES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")  # (a bare CR overwrites a line)
    text = _SEPARATORS.sub("\n", _CONTROLS.sub("", text))
    if text.isascii() or text.replace("\n", "").replace("\t", "").isprintable():
        return text  # (printable: no control, format, private-use or surrogate character is left to drop)
    return _each_character(text)


def _each_character(text: str) -> str:
    """``text`` without controls, format and private-use characters (tab and newline stay), each lone
    surrogate made U+FFFD: one character at a time (a traced table of 2,000 characters took 0.7 ms here;
    ``str.isprintable`` spares it to every text with none of them)."""
    return "".join("\ufffd" if unicodedata.category(ch) == "Cs" else ch for ch in text
                   if ch in "\n\t" or unicodedata.category(ch) not in _DROPPED)


def clean_tree(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, numbers) with every string and key cleaned;
    :class:`Unreadable` when its dicts and lists nest more than ``max_depth`` deep. Other objects are
    returned as they are."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, (dict, list, tuple)) and max_depth <= 0:
        raise Unreadable("nested too deep")
    if isinstance(value, dict):
        return {clean(str(k)): clean_tree(v, max_depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_tree(v, max_depth - 1) for v in value)
    return value


def loads(data: bytes | bytearray | memoryview, max_depth: int = MAX_DEPTH) -> Any:
    """JSON from the child, within ``max_depth``, every string cleaned; :class:`Unreadable` otherwise."""
    try:
        parsed = json.loads(bytes(data))
    except (ValueError, RecursionError):  # json's own depth guard: a RecursionError, not a ValueError
        raise Unreadable("not JSON (or nested past Python's recursion limit)") from None
    return clean_tree(parsed, max_depth)


# -- the facts of a message: the types the child writes (shapetrace.exercises.facts, worker.py) --------------

_INT = (int,)
_STR = (str,)
_LIST = (list,)
#: fact -> the types its value may have (None is always allowed: a fact the child did not fill in).
FACT_TYPES: dict[str, tuple[type, ...]] = {
    "exc": (dict,), "frame": _LIST, "output": _STR, "output_total": _INT, "short": _STR, "type": _STR,
    "alloc_bytes": _INT, "events": _LIST, "diagnostics": _LIST, "crash_lines": _LIST, "copies": _LIST,
    "allocs": _LIST, "in_place": _LIST, "table": _STR, "swapped": _LIST, "returned": _STR,
    "shape": _LIST, "dtype": _STR, "unreadable": (bool,), "autograd": _LIST,
}
_EXC_TYPES = {"type": _STR, "mro": _LIST, "message": _STR, "unshown": _STR, "timed_out": (bool,)}
_EVENT_TYPES = {"index": _INT, "op": _STR, "source": _STR, "code": _STR, "error": (bool,), "shape": _LIST,
                "dims": _LIST, "inputs": _LIST}
_DIAGNOSTIC_TYPES = {"severity": _STR, "kind": _STR, "event": _INT, "message": _STR, "fix": _STR}


def _typed(where: str, item: Any, types: dict[str, tuple[type, ...]]) -> None:
    if not isinstance(item, dict):
        raise Unreadable(f"{where} is not an object")
    for key, allowed in types.items():
        value = item.get(key)
        if value is not None and (type(value) not in allowed or (bool not in allowed and type(value) is bool)):
            raise Unreadable(f"{where}: {key} is a {type(value).__name__}")


def _all(where: str, items: list, kinds: tuple[type, ...]) -> None:
    if not all(type(x) in kinds for x in items):
        raise Unreadable(f"{where} holds something other than {' or '.join(k.__name__ for k in kinds)}")


#: The fields of a frame's header the checker reads, with the types the child writes (a ``case`` of 0.0 once
#: indexed the list of cases in the parent: a TypeError, an internal error).
HEADER_TYPES: dict[str, tuple[type, ...]] = {"kind": _STR, "case": _INT, "n": _INT, "missing": _LIST,
                                             "raw": (bool,), "shape": _LIST, "dtype": _STR}


def checked_header(header: Any) -> dict:
    """``header`` when every field the checker reads has the type the child writes; :class:`Unreadable` else."""
    _typed("the header", header, HEADER_TYPES)
    _all("the header's shape", header.get("shape") or [], _INT)
    return header


def checked_facts(facts: Any) -> dict:
    """``facts`` when every fact the judge reads has the type the child writes; :class:`Unreadable` else.

    Unknown facts pass untouched (the judge never reads them). Strings were cleaned by :func:`loads`.
    """
    if not isinstance(facts, dict):
        raise Unreadable("the facts are not an object")
    _typed("the facts", facts, FACT_TYPES)
    if facts.get("exc") is not None:
        _typed("the exception", facts["exc"], _EXC_TYPES)
        _all("the exception's classes", facts["exc"].get("mro") or [], _STR)
    for event in facts.get("events") or []:
        _typed("a traced op", event, _EVENT_TYPES)
    for diagnostic in facts.get("diagnostics") or []:
        _typed("a diagnostic", diagnostic, _DIAGNOSTIC_TYPES)
    for key in ("crash_lines", "copies", "allocs"):
        _all(key, facts.get(key) or [], _STR)
    _all("swapped", facts.get("swapped") or [], _INT)
    for key in ("frame", "in_place"):
        pair = facts.get(key)
        if pair and not (len(pair) == 2 and type(pair[0]) in (int, type(None)) and type(pair[1]) is str):
            raise Unreadable(f"{key} is not a line and its code")
    used = facts.get("autograd")
    if used and not (len(used) == 3 and type(used[0]) in (int, type(None)) and type(used[1]) is str
                     and type(used[2]) is str):
        raise Unreadable("autograd is not a line, its code and what it showed")
    return facts
