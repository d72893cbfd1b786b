"""Which ops ran inside library code, and the user's call that reached them.

A finding on an op the user did not write (``q.view(...)`` inside torch's
``multi_head_attention_forward``, a ``view`` inside an installed package's ``forward``) cannot be fixed
where it shows: the user changes what their own call passes, or the options it builds the library's
object with. This module says, for each such op, which library call it ran in (one id per call: its
findings are one bug), what that call is, and where the user's code made it; :mod:`.rules.library`
words the finding at that call. Two ways an op is inside a library, both read after the run:

* an opened composite (:func:`~.capture.run_opened`: ``nn.MultiheadAttention``) made it: the capture
  keeps the records each one made;
* it ran in a module's forward and the innermost code of its call site is an installed package's
  (``site-packages``, ``dist-packages``: transformers, timm): the user's call is the first code object
  outwards that is not. (Outside any module, installed code on the stack is only what called the user's
  code, a command line or a test runner: click, typer, pytest; shapetrace's own files are never a library.)

Nothing here imports torch or Rich.

>>> is_installed("/usr/lib/python3/dist-packages/timm/layers/attention.py")
True
>>> is_installed("/home/me/model.py")
False
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # shapetrace/
#: the fix of a finding inside library code: what to check at the user's call, then (installed code is not
#: known to be right) where the rule's own fix belongs
_GENERIC_FIX = ("The op is inside {who}, not in your code: check that your call passes what it expects (the order "
                "of its inputs' axes, their shapes, the options you build it with).")
_UPSTREAM = " If it does, the bug is in {package} itself; there, the fix is: {fix}"


@dataclass(frozen=True)
class Inside:
    """One op's place in library code: the call it ran in and how to word a finding on it."""

    call: tuple              # one key per library call: the findings inside one call are one bug
    what: str                # "nn.MultiheadAttention", "transformers' Attention.forward"
    caller: str              # "mha.py:7 (out, _ = mha(x, x, x))", "Model.forward in model.py"
    fix: str                 # the fix at the level of the user's call
    package: str = ""        # an installed package, not known to be right: "" for torch's own composites

    def fix_of(self, rule_fix: str) -> str:
        """The fix of a finding inside this call whose rule would say ``rule_fix`` at the op itself."""
        if not self.package or not rule_fix:
            return self.fix
        return self.fix + _UPSTREAM.format(package=self.package, fix=rule_fix)


def is_installed(filename: str) -> bool:
    """Is ``filename`` an installed package's (``site-packages``, ``dist-packages``), not the user's (nor
    shapetrace's own model code and lessons, which its sites show as the user's)?"""
    if filename.startswith(_PKG_DIR) or f"{os.sep}lessons{os.sep}" in filename:
        return False
    return any(f"{os.sep}{folder}{os.sep}" in filename for folder in ("site-packages", "dist-packages"))


def inside_library(events: Sequence[Event], opened: Iterable[tuple[Any, int, int]],
                   event_of_record: Mapping[int, int]) -> dict[int, Inside]:
    """``{event index: Inside}`` for every op that ran inside library code (none for the user's own ops).

    Args:
        events: the run's events (their sites are read for installed code).
        opened: ``(spec, start, end)`` of each opened composite: the records it made, [start, end).
        event_of_record: the record -> event map of the run.
    """
    found: dict[int, Inside] = {}
    for spec, start, end in opened:
        rows = [event_of_record[i] for i in range(start, end) if i in event_of_record]
        if not rows or not spec.called_as:
            continue
        first = events[rows[0]]
        caller = f"{first.source} ({first.code})" if first.code else first.source
        for index in rows:
            found.setdefault(index, Inside(("opened", start), spec.called_as, caller,
                                           spec.caller_fix or _GENERIC_FIX.format(who=spec.called_as)))
    for e in events:
        if e.index not in found:
            inside = _installed_site(e)
            if inside is not None:
                found[e.index] = inside
    return found


def _installed_site(e: Event) -> Inside | None:
    """``e``'s place when it ran in a module's forward, the innermost code of its site is an installed
    package's and the user's code called into it (the user's call: the first code object outwards that is
    not installed)."""
    codes = getattr(e.site, "codes", None) or ()
    if not codes or not e.module or not is_installed(codes[0].co_filename):
        return None
    outer = next((i for i, code in enumerate(codes) if not is_installed(code.co_filename)), None)
    if outer is None:
        return None
    entry, user = codes[outer - 1], codes[outer]
    package = _package(entry.co_filename)
    who = f"{package}'s {_qualname(entry)}"
    caller = f"{_qualname(user)} in {os.path.basename(user.co_filename)}"
    return Inside(("installed", id(entry), id(user)), who, caller, _GENERIC_FIX.format(who=who), package)


def _qualname(code) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _package(filename: str) -> str:
    """The installed package a file belongs to (``.../site-packages/timm/layers/x.py`` -> ``timm``)."""
    parts = filename.split(os.sep)
    at = max(i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages"))
    name = parts[at + 1] if at + 1 < len(parts) else "?"
    return name[:-3] if name.endswith(".py") else name
