"""Commands for self-study: ``lessons``, ``lesson N``, ``exercise ...`` and ``quiz``.

Nothing here imports torch at module level: ``shapetrace lessons`` and
``shapetrace exercise list`` read TOML and JSON only. Commands that trace or
check import the engine inside their bodies.
"""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path

import typer

from shapetrace.app.classroom import ViewOptions, check_auto
from shapetrace.app.exportpath import check_export_path, write_atomically
from shapetrace.app.textinput import read_answers, read_line
from shapetrace.cli.common import (
    TRACEBACK_HELP,
    err_console,
    force_option,
    guarded,
    out_console,
    path_option,
    state_dir_option,
    stdin_is_terminal,
    stdin_stream,
    theme_option,
    width_option,
    workspace_option,
    write_json,
)
from shapetrace.errors import RunError, UsageError

WORKSPACE_HELP = "Folder of your exercise files (default ./shapetrace-exercises)."


def load_curriculum():
    from shapetrace.exercises.content import load

    return load()


def load_progress(console=None, quiet: bool = False):
    from shapetrace.exercises.progress import Progress

    progress = Progress.load()
    for warning in [] if quiet else progress.warnings:
        report_warning(warning)
    return progress


def progress_where(path) -> str:
    """Where the ✓ marks come from: one progress file for every folder, and how to use another."""
    return (f"progress: {path} (one file for every folder you work in; --state-dir DIR or "
            "SHAPETRACE_STATE_DIR=DIR keeps it elsewhere)")


def update_progress(change, quiet: bool = False):
    """Apply ``change(progress)`` under the progress lock; any problem is a warning (printed unless
    ``quiet``), never an error. Returns the progress (``saved`` says whether it was kept)."""
    from shapetrace.exercises.progress import Progress

    with Progress.update() as progress:
        change(progress)
    for warning in [] if quiet else progress.warnings:
        report_warning(warning)
    return progress


def report_warning(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text.assemble(("warning: ", "bold yellow"), message))


def exercise_rows(curriculum, progress, workspace) -> list[dict]:
    from shapetrace.exercises.progress import learner_file

    return [{"id": e.id, "title": e.title, "lesson": e.lesson, "kind": e.kind,
             "status": progress.status(e.id, learner_file(workspace, e.id))} for e in curriculum.exercises]



def lessons(
    json_out: bool = typer.Option(False, "--json", help="Print the curriculum as JSON."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    width: int | None = width_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The curriculum: every lesson and exercise, with your progress."""
    with guarded(traceback):
        curriculum, progress = load_curriculum(), load_progress()
        rows = exercise_rows(curriculum, progress, workspace)
        data = [{"lesson": lesson.number, "title": lesson.title, "summary": lesson.summary,
                 "exercises": [r for r in rows if r["lesson"] == lesson.number]}
                for lesson in curriculum.lessons]
        if json_out:
            write_json(json.dumps(data, indent=2))
            return
        from rich.text import Text

        from shapetrace.render.lessons import curriculum_view

        console = out_console(width)
        console.print(curriculum_view(data))
        console.print(Text(progress_where(progress.path), style="dim"))



def lesson(
    number: int = typer.Argument(..., help="The lesson number (see `shapetrace lessons`)."),
    run_examples: bool = typer.Option(True, "--run/--no-run", help="Trace the live examples."),
    all_ops: bool = typer.Option(False, "--all", help="Show every op in the examples' tables, also the "
                                 "elementwise math that keeps its operands' axes (rows marked ·)."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    width: int | None = width_option(),
    present: bool = typer.Option(False, "--present", help="Show the lesson as screens, one section at a "
                                                          "time (Enter/b/q), for projecting in class."),
    auto: float | None = typer.Option(None, "--auto", metavar="SECONDS",
                                         help="With --present: advance by itself."),
    export: Path | None = path_option(None, "--export", metavar="PATH.html", what="a file name ending in .html",
                                       help="Write the lesson as a page instead: prose, code, traced tables, "
                                            "answers folded until asked for."),
    theme: str = theme_option(),
    force: bool = force_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Read one lesson: the text, and each live example traced op by op."""
    with guarded(traceback):
        if auto is not None and not present:
            raise UsageError("--auto SECONDS works with --present")
        check_auto(auto)
        if all_ops and (present or export is not None):
            raise UsageError("--all works with the printed lesson, not with --present or --export")
        if export is not None and present:
            raise UsageError("--export writes a page; --present shows screens: choose one")
        curriculum, progress = load_curriculum(), load_progress()
        chosen = curriculum.lesson(number)
        if export is not None:
            _export_lesson(chosen, export, theme, force)
            return
        if present:
            _present(chosen, width, auto)
            return
        rows = [r for r in exercise_rows(curriculum, progress, workspace) if r["lesson"] == number]
        from shapetrace.app.lessons import lesson_blocks
        from shapetrace.engine.unrowed import recording_every_call
        from shapetrace.render.lessons import print_lesson

        with recording_every_call() if all_ops else contextlib.nullcontext():
            blocks = lesson_blocks(chosen, run=run_examples)
        print_lesson(blocks, out_console(width), rows)


def _export_lesson(chosen, path: Path, theme: str, force: bool) -> None:
    """Write ``lesson N`` as a page (.html only) and say where it went, on stderr."""
    from shapetrace.render.export import check_theme

    if path.suffix.lower() != ".html":
        raise UsageError(f"--export {path}: a lesson exports as a page; use a path ending in .html")
    check_theme(theme)
    target = check_export_path(path, force)
    from shapetrace.app.lessons import lesson_blocks
    from shapetrace.render.lesson_page import lesson_page

    text = lesson_page(chosen.number, chosen.title, lesson_blocks(chosen), theme)
    try:
        write_atomically(target, text, force)
    except OSError as exc:
        raise RunError(f"--export {path}: cannot write the file ({exc.strerror or exc})") from exc
    err_console().print(f"exported lesson {chosen.number} to {target}: open it in a browser", style="green",
                        highlight=False)


def _present(chosen, width: int | None, auto: float | None) -> None:
    """Screens on a terminal; elsewhere one line on stderr and the plain lesson."""
    from shapetrace.tui.step import step_mode_available

    if not step_mode_available():
        from shapetrace.app.lessons import lesson_blocks
        from shapetrace.render.lessons import print_lesson

        err_console().print("--present needs an interactive terminal; showing the plain lesson instead",
                            style="yellow", highlight=False)
        print_lesson(lesson_blocks(chosen), out_console(width))
        return
    from shapetrace.tui.present import present_lesson

    code = present_lesson(chosen, out_console(width), ViewOptions(width=width), auto)
    if code:
        raise typer.Exit(code)


def quiz(
    topic: str | None = typer.Option(None, "--topic", help="Only questions on this topic (e.g. strides)."),
    count: int = typer.Option(10, "--count", min=1, help="How many questions."),
    answers_from: Path | None = path_option(None, "--answers-from", what="a file with one answer per line",
                                            help="Read answers from this file, "
                                                "one per line (for scripts)."),
    seed: int | None = typer.Option(None, "--seed", help="Shuffle with this seed (default: a random "
                                       "order at a terminal, file order otherwise)."),
    list_topics: bool = typer.Option(False, "--topics", help="List the topics and exit."),
    all_ops: bool = typer.Option(False, "--all", help="Show every op in the traced answers, also the "
                                 "elementwise math that keeps its operands' axes (rows marked ·)."),
    width: int | None = width_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Predict shapes, strides, views and copies; each answer is checked against torch."""
    with guarded(traceback):
        from shapetrace.exercises import quiz as qz
        from shapetrace.exercises.answers import check_answer

        questions = qz.bank(load_curriculum().root)
        if list_topics:
            for name in qz.topics(questions):
                typer.echo(f"{name}  ({sum(q.topic == name for q in questions)} questions)")
            return
        if answers_from is not None:
            answers = iter(read_answers(answers_from, "--answers-from"))
        else:
            answers = None
        interactive = answers is None and stdin_is_terminal()
        if seed is None and interactive:
            seed = random.randrange(1 << 30)
        chosen = [qz.solve(q) for q in qz.select(questions, topic, count, seed)]
        console = out_console(width)
        from shapetrace.app.lessons import quiz_trace
        from shapetrace.render.exercise import question_view, quiz_feedback

        score = asked = 0
        for n, q in enumerate(chosen, 1):
            console.print(question_view(n, len(chosen), q))
            typed = _next_answer(answers, interactive)
            if typed is None:
                console.print("[dim](no more answers)[/dim]")
                break
            if not interactive:
                console.print(f"> {typed}", highlight=False)
            understood, right = check_answer(q.ask, typed, q.answer)
            asked += 1
            score += right
            console.print(quiz_feedback(q, typed, understood, right,
                                        trace=None if right else quiz_trace(q, every_call=all_ops)))
        console.print(f"\n[bold]score: {score}/{asked}[/bold]" + (f" (of {len(chosen)} questions)"
                                                                   if asked < len(chosen) else ""))
        if asked:
            update_progress(lambda p: p.record_quiz(score, asked, topic))


def _next_answer(answers, interactive: bool) -> str | None:
    if answers is not None:
        return next(answers, None)
    if not interactive:
        line = read_line(stdin_stream())
        return line.rstrip("\n") if line else None
    try:
        return input("your answer: ")
    except EOFError:
        return None
