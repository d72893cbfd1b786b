"""Step mode: one op per screen, the forward pass's code with the current line highlighted.

Keys: Enter / Space / → next, b / ← back, d toggles the memory diagram, g N Enter goes to op #N,
e goes to the next op with an error, q quits (and Enter on the last screen). With ``run --backward``
the backward's screens follow the forward's summary (:mod:`.backward_steps`), the same keys.
An op's own findings (✗ error, ! warning) show on its screen, under its row.
The screen is drawn in the terminal's alternate screen and redrawn in place (also
on a resize); the terminal's settings and main screen come back on q, on Ctrl-C
and on any error.

:class:`StepScreen` is a plain renderable (testable at any size);
:func:`run_step_mode` is the interactive loop around it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.control import Control
from rich.text import Text

from shapetrace.app.classroom import ViewOptions, names_for
from shapetrace.render.classroom import op_table
from shapetrace.render.highlight import highlight_line
from shapetrace.render.source import CodeWindow, code_window
from shapetrace.render.table import (
    diagnostic_lines,
    footer_text,
    input_lines,
    setup_line,
    trace_header,
    verdict_lines,
)
from shapetrace.tui.viewport import Scroll, body_lines, segments, window

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report
    from shapetrace.tui.backward_steps import BackwardSteps

NEXT, BACK, DIAGRAM, QUIT = "next", "back", "diagram", "quit"
GOTO, NEXT_ERROR, ERASE, CANCEL = "goto", "next-error", "erase", "cancel"
DOWN, UP, PAGE = "down", "up", "page"
KEYS = {"\r": NEXT, "\n": NEXT, " ": PAGE, "\x1b[C": NEXT, "\x1bOC": NEXT, "l": NEXT,
        "b": BACK, "\x1b[D": BACK, "\x1bOD": BACK, "h": BACK,
        "\x1b[B": DOWN, "\x1bOB": DOWN, "j": DOWN, "\x1b[A": UP, "\x1bOA": UP, "k": UP,
        "d": DIAGRAM, "q": QUIT, "Q": QUIT, "g": GOTO, "e": NEXT_ERROR,
        "\x7f": ERASE, "\b": ERASE, "\x1b": CANCEL}
HELP_WIDE = "Enter/Space/→ next · b/← back · d diagram on/off · g go to op · e next error · q quit"
HELP_NARROW = "⏎ next · b back · d diagram · g go to · e error · q quit"


def parse_keys(data: str) -> Iterator[str]:
    """Split raw terminal input into actions; arrow keys arrive as escape sequences, digits as
    themselves (the op number after g)."""
    i = 0
    while i < len(data):
        if data[i] == "\x1b" and i + 2 < len(data) and data[i + 1] in "[O":
            key, i = data[i: i + 3], i + 3
        else:
            key, i = data[i], i + 1
        if key in KEYS:
            yield KEYS[key]
        elif key.isdigit() and key.isascii():
            yield key


@dataclass
class StepState:
    """Where the class is: op ``index`` (``count - 1`` is the summary screen) and the diagram toggle.

    ``numbers`` are the op numbers as printed (``#N``) by position and ``errors`` the positions of ops
    with an error, for ``g`` and ``e``; ``typed`` holds the digits typed after ``g`` (None when not
    typing); ``message`` is a one-line answer (``no op #99``) shown until the next key.
    ``exit_at_end``: Enter on the last screen (step mode's summary) quits.
    ``scroll``: where a screen taller than the terminal is scrolled to: Space pages through what is
    below, then goes on (read with Space alone, nothing is skipped); ↓ and ↑ scroll; Enter and → go
    on at once, unless ``paged`` (a presented lesson, whose tall screens are pages of whole units):
    there every key that goes on shows the next page first, and b/← the page before.
    """

    count: int
    index: int = 0
    diagram: bool = False
    numbers: tuple[int, ...] = ()
    errors: tuple[int, ...] = ()
    exit_at_end: bool = False
    typed: str | None = None
    message: str = ""
    scroll: Scroll = field(default_factory=Scroll)
    paged: bool = False

    def apply(self, action: str, wrap: bool = False) -> bool:
        """Apply one action; returns False on quit."""
        self.message = ""
        if self.typed is not None:
            return self._typing(action)
        if action == QUIT:
            return False
        if action == UP:
            self.scroll.up()
            return True
        if action in (PAGE, DOWN) or (self.paged and action == NEXT):
            if self.scroll.down() or action == DOWN:
                return True
            action = NEXT  # Space at a screen's end goes on
        if self.paged and action == BACK and self.scroll.up():
            return True
        before = self.index
        going_on = self._move(action, wrap)
        if self.index != before:
            self.scroll.top()
        return going_on

    def _move(self, action: str, wrap: bool) -> bool:
        if action == NEXT:
            if self.exit_at_end and not wrap and self.index == self.count - 1:
                return False
            self.index = 0 if wrap and self.index == self.count - 1 else min(self.index + 1, self.count - 1)
        elif action == BACK:
            self.index = max(self.index - 1, 0)
        elif action == DIAGRAM:
            self.diagram = not self.diagram
        elif action == GOTO and self.numbers:
            self.typed = ""
        elif action == NEXT_ERROR and self.numbers:
            self._next_error()
        return True

    def _typing(self, action: str) -> bool:
        action = NEXT if action == PAGE else action
        if action.isdigit():
            self.typed = (self.typed + action)[:9]
        elif action == ERASE:
            self.typed = self.typed[:-1]
        elif action == NEXT:
            typed, self.typed = self.typed, None
            if typed:
                before = self.index
                self._go_to(int(typed))
                if self.index != before:
                    self.scroll.top()
        elif action in (CANCEL, GOTO, QUIT):
            self.typed = None
        return True

    def _go_to(self, number: int) -> None:
        if number in self.numbers:
            self.index = self.numbers.index(number)
        else:
            self.message = f"no op #{number}: the ops are #{self.numbers[0]} to #{self.numbers[-1]}"

    def _next_error(self) -> None:
        if not self.errors:
            self.message = "no op has an error in this trace"
            return
        later = [i for i in self.errors if i > self.index]
        if later:
            self.index = later[0]
            return
        self.index = self.errors[0]
        self.message = f"no error after this op: back to the first, #{self.numbers[self.index]}"


def diagram_for(event: Event, width: int):
    """The memory diagram of one op (:func:`shapetrace.render.diagram.event_diagram`)."""
    from shapetrace.render.diagram import event_diagram

    try:
        return event_diagram(event, width)
    except Exception as exc:  # a diagram bug must not end the lesson
        return Text(f"memory diagram failed: {type(exc).__name__}: {exc}", style="red")


class StepScreen:
    """One full screen of step mode for op ``state.index`` of ``trace``."""

    def __init__(self, trace: Report, state: StepState, options: ViewOptions = ViewOptions(),
                 source_files: Mapping[str, str] | None = None, auto: float | None = None,
                 diagram: Callable = diagram_for, backward: BackwardSteps | None = None):
        self.trace, self.state, self.options = trace, state, options
        self.source_files, self.auto, self.diagram = source_files, auto, diagram
        self.backward = backward   #: the backward's screens, after the forward's summary (``run --backward``)

    @property
    def event(self) -> Event | None:
        events = self.trace.events
        return events[self.state.index] if self.state.index < len(events) else None

    @property
    def grad(self) -> int | None:
        """Which backward screen this is (0 for the first row), or None on the forward's screens."""
        k = self.state.index - len(self.trace.events) - 1
        return k if self.backward is not None and k >= 0 else None

    @property
    def coded(self) -> Event | None:
        """The forward op whose code line is highlighted: this op's, or the one a backward row differentiates."""
        return self.backward.event_of(self.grad) if self.grad is not None else self.event

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Title, code, a rule, the op's part (row, findings, then the diagram), the keys. The code gets
        the rows the op's part leaves; when even the op's part does not fit, the code goes and the op's
        part scrolls, with a marker saying what is below (the keys stay on the last line)."""
        width = options.max_width
        height = options.height or console.height
        title = self.title(width)
        lower = self.backward.part(self.grad, width) if self.grad is not None else \
            self.op_part(width) if self.event is not None else self.summary_part()
        lines = body_lines(console, options, lower)
        pinned = len(body_lines(console, options, title)) + 2  # the title, the rule and the keys
        budget = height - len(lines) - pinned
        yield title
        if self.coded is not None and budget >= 3:
            yield self.code_part(budget)
        yield Text("─" * width, style="dim")
        yield from segments(window(console, options, lines, height - pinned, self.state.scroll))
        yield self.help_line(width)

    def title(self, width: int) -> Text:
        n = len(self.trace.events)
        e = self.event
        last = self.trace.events[-1].index if n else 0
        mark = " · ✗ error" if e is not None and self.findings(e, "error") else ""
        where = (f"#{e.index} {e.op}{mark} · ops #0-#{last} · {e.source.rsplit('/', 1)[-1]}" if e
                 else self.backward.where(self.grad) if self.grad is not None else f"summary · {n} ops")
        head = trace_header(self.trace)
        text = Text(f" shapetrace step · {where} ", style="bold reverse")
        if head:
            text.append("\n" + head[0].removeprefix("shapetrace · "), style="dim")
        text.no_wrap, text.overflow = True, "ellipsis"
        return text

    def code_part(self, budget: int) -> Group:
        e = self.coded
        window = code_window(e.source, e.stack, budget - 1, self.source_files)
        if window is None:
            return Group(Text(f"{e.source}", style="dim"), Text("▶ " + e.code.strip(), style="bold"))
        return Group(Text(window.path, style="dim"), *code_lines(window))

    def op_part(self, width: int) -> Group:
        e = self.event
        long_names = names_for(self.trace, self.options)
        one_op = replace(self.options, fold=False)  # no input row, nothing to fold in one op
        parts = [*self.setup_part(e), *input_lines(e, long_names), op_table([e], one_op, long_names),
                 *self.finding_lines(e)]
        if self.state.diagram:
            parts += [Text(f"memory diagram · #{e.index} {e.op} (d hides it)", style="bold"),
                      self.diagram(e, width)]
        return Group(*parts)

    def setup_part(self, e: Event) -> list:
        """Above the first op, as the table folds it: the ops that built the model (not in the totals)."""
        line = setup_line(self.trace) if e is self.trace.events[0] else ""
        return [Text(line, style="dim")] if line else []

    def findings(self, e: Event, severity: str | None = None) -> list:
        return [d for d in self.trace.diagnostics
                if d.event == e.index and (severity is None or d.severity == severity)]

    def finding_lines(self, e: Event) -> list:
        """This op's own findings, as the table's end lists them (``✗ error kind at #N: ...``)."""
        mine = self.findings(e)
        return list(diagnostic_lines(mine))[1:] if mine else []

    def summary_part(self) -> Group:
        after = [Text(self.backward.coming(), style="bold")] if self.backward is not None else []
        return Group(Text("end of the forward pass", style="bold"),
                     footer_text(self.trace, self.trace.events, setup_shown=True),
                     *verdict_lines(self.trace), *after)

    def help_line(self, width: int) -> Text:
        if self.state.typed is not None:
            return Text(f"go to op #{self.state.typed}▏ (type the number, Enter goes, Esc cancels)", style="bold")
        keys = HELP_WIDE if width >= len(HELP_WIDE) + 14 else HELP_NARROW  # room for " · auto 0.2s"
        if self.state.index == self.state.count - 1:
            keys = keys.replace("Enter/Space/→ next", "Enter quits").replace("⏎ next", "⏎ quits")
        if self.auto:
            keys += f" · auto {self.auto:g}s"
        if self.state.message:
            return Text.assemble((self.state.message, "bold yellow"), " · ", (keys, "dim"))
        return Text(keys, style="dim")


def code_lines(window: CodeWindow) -> Iterator[Text]:
    """Numbered source lines; the current one marked ▶ and highlighted."""
    digits = len(str(max(n for n, _ in filter(None, window.lines))))
    for row in window.lines:
        if row is None:
            yield Text(" " * (digits + 3) + "⋮", style="dim")
            continue
        n, line = row
        current = n == window.current
        text = Text(f"{'▶' if current else ' '} {n:>{digits}} ", style="bold yellow" if current else "dim")
        text.append_text(Text(line, style="bold reverse") if current else highlight_line(line))
        text.no_wrap, text.overflow = True, "ellipsis"
        yield text


def step_mode_available() -> bool:
    """Step mode needs a real terminal on stdin (keys) and stdout (the screen)."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def run_step_mode(trace: Report, console: Console, auto: float | None = None,
                  source_files: Mapping[str, str] | None = None,
                  options: ViewOptions = ViewOptions(), doubled=None) -> int:
    """Step through any :class:`~shapetrace.engine.report.Report` interactively; returns an exit code.

    Args:
        trace: the recorded forward pass (reference model or a user's file).
        console: a Console writing to the terminal.
        auto: advance every ``auto`` seconds (wrapping round after the summary screen).
        source_files: displayed source path -> real file, for paths the tool cannot find itself.
        options: readability options (compact, explain, long names, width).
        doubled: with a backward, ``(2T, the backward of the same model at 2T)`` for its summary.

    Returns:
        0 after q, 130 after Ctrl-C, 143 after SIGTERM.
    """
    backward = backward_steps(trace, options, doubled)
    state = step_state(trace, len(backward) if backward is not None else 0)
    return run_interactive(StepScreen(trace, state, options, source_files, auto, backward=backward), console, auto)


def backward_steps(trace: Report, options: ViewOptions = ViewOptions(), doubled=None) -> BackwardSteps | None:
    """The backward's screens after the forward's (``run --backward``), folded as the table is; else None."""
    if getattr(trace, "backward", None) is None:
        return None
    from shapetrace.tui.backward_steps import BackwardSteps

    return BackwardSteps(trace, options, doubled)


def step_state(trace: Report, backward_screens: int = 0) -> StepState:
    """The first screen of ``trace``, with its op numbers and the positions of its errors (``backward_screens``
    more after the forward's summary)."""
    numbers = tuple(e.index for e in trace.events)
    wrong = {d.event for d in trace.diagnostics if d.severity == "error"}
    errors = tuple(i for i, n in enumerate(numbers) if n in wrong)
    return StepState(len(trace.events) + 1 + backward_screens, numbers=numbers, errors=errors, exit_at_end=True)


def run_interactive(view, console: Console, auto: float | None = None) -> int:
    """Show ``view`` full screen and feed it keys until q; shared by step mode and ``--present``.

    ``view`` is a renderable with a ``state`` (``apply(action) -> bool``) and ``options.width``.
    The terminal is restored on q, Ctrl-C, SIGTERM and errors; a resize redraws.

    Returns:
        0 after q, 130 after Ctrl-C, 143 after SIGTERM.
    """
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    wake_r, wake_w = os.pipe()
    old_winch = signal.signal(signal.SIGWINCH, lambda *_: os.write(wake_w, b"r"))
    old_term = signal.signal(signal.SIGTERM, _terminated)
    try:
        tty.setcbreak(fd)
        with console.screen(hide_cursor=True) as screen:
            _loop(screen, console, view, fd, wake_r, auto)
        return 0
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        return 143
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, old_winch)
        signal.signal(signal.SIGTERM, old_term)
        os.close(wake_r)
        os.close(wake_w)


class _Terminated(Exception):
    """SIGTERM while stepping: unwind like Ctrl-C so the terminal is restored."""


def _terminated(signum, frame) -> None:
    raise _Terminated


def _fit_console(console: Console, width: int | None) -> None:
    try:
        cols, rows = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return
    console.size = (min(cols, width) if width else cols, rows)


#: After a resize, the screen is drawn once more this many seconds later: a terminal may change its own
#: grid after it tells the program the new size, and a frame drawn in between is scrolled or cut.
RESIZE_SETTLE = 0.2


def _loop(screen, console: Console, view, fd: int, wake_r: int, auto: float | None) -> None:
    deadline = time.monotonic() + auto if auto else None
    settle = None  # when to draw again after a resize
    while True:
        _fit_console(console, view.options.width)
        # rich's screen.update writes its frame from wherever the cursor was left (the last row), so
        # every frame scrolled the whole screen through; from the top-left it overwrites in place
        console.control(Control.home())
        screen.update(view)
        waits = [t - time.monotonic() for t in (deadline, settle) if t is not None]
        ready, _, _ = select.select([fd, wake_r], [], [], max(0.0, min(waits)) if waits else None)
        if wake_r in ready:
            os.read(wake_r, 64)  # a resize: redraw at the new size, now and once it has settled
            settle = time.monotonic() + RESIZE_SETTLE
            continue
        if settle is not None and time.monotonic() >= settle:
            settle = None
            if fd not in ready:
                continue
        if fd in ready:
            for action in parse_keys(os.read(fd, 64).decode("utf-8", "replace")):
                if not view.state.apply(action):
                    return
            deadline = time.monotonic() + auto if auto else None
        elif not ready and deadline is not None and time.monotonic() >= deadline:
            view.state.apply(NEXT, wrap=True)
            deadline = time.monotonic() + auto
