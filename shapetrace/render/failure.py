"""The failing op of a traced script: operands, torch's own message, and the explanation."""

from __future__ import annotations

import os
import traceback as tb
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.text import Text

from shapetrace.app.script import HardExit
from shapetrace.engine.failure import explain_failure, operand_lines
from shapetrace.engine.ops import spec_for
from shapetrace.engine.verdict import exception_message, one_line, raised_text
from shapetrace.render.indent import Indent

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.script import ScriptRun
    from shapetrace.engine.events import Event


def failure_lines(run: ScriptRun) -> Iterable[Text]:
    """What went wrong: the failed op's block, or the script's own exception and where it came from."""
    exc = run.exception
    if exc is None:
        return
    yield Text("")
    if run.failed is not None:
        yield from _failed_op(run.failed, exc)
        return
    if isinstance(exc, SystemExit):
        yield Text.assemble(("✗ the script exited with code ", "bold red"), (str(exc.code), "bold red"))
        return
    if isinstance(exc, HardExit):
        yield Text.assemble(("✗ the script ended the process with ", "bold red"), (str(exc), "bold red"),
                            (f"  {_user_location(exc, run.script)}".rstrip(), "dim"))
        yield _indented(Text("(os._exit ends Python on the spot; shapetrace caught the call to show the ops "
                             "recorded before it)", style="dim"), 2)
        return
    where = _user_location(exc, run.script)
    yield Text.assemble(("✗ the script raised ", "bold red"), (raised_text(exc), "bold"),
                        (f"  {where}" if where else "", "dim"))
    if run.trace.events:
        said = ("(raised outside the tensor ops shapetrace records: the table above shows every recorded op up "
                "to that point)")
    else:
        said = "(raised before any tensor op that shapetrace records, so there is no table)"
    yield _indented(Text(said, style="dim"), 2)


def _failed_op(e: Event, exc: BaseException) -> Iterable:
    yield Text.assemble((f"✗ #{e.index} {e.op} raised", "bold red"), (f"  {e.source}", "dim"))
    yield _indented(Text(e.code.split("  #")[0].rstrip(), style="bold"), 2)
    for line in operand_lines(e):
        yield _indented(Text(line), 2)
    text = exception_message(exc).strip()
    message = one_line(text.splitlines()[0]) if text else ""
    yield _indented(Text.assemble("torch: ", (f"{type(exc).__name__}: {message}", "red")), 2)
    if spec_for(e.op).starts_backward:   # (the registry's: a failed call's own spec is a bare one)
        return   # (the loss is not what torch refused: the backward's findings, with the table, say what was)
    yield Text("")
    for line in explain_failure(e).splitlines():
        stripped = line.lstrip(" ")
        yield _indented(Text(stripped, style="" if line.startswith("  ") else "italic"),
                        len(line) - len(stripped))


def _indented(text: Text, left: int) -> Indent:
    """A paragraph whose wrapped lines keep the indent (and a hanging indent for list items)."""
    return Indent(text, left)


def _user_location(exc: BaseException, script: str) -> str:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frames = [f for f in tb.extract_tb(exc.__traceback__) if not f.filename.endswith("runpy.py")
              and not os.path.abspath(f.filename).startswith(package)]
    if not frames:
        return ""
    last = frames[-1]
    name = os.path.relpath(last.filename) if not last.filename.startswith("<") else last.filename
    return f"{name}:{last.lineno}"
