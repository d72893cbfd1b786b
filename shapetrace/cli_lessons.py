"""Commands for self-study: ``lessons``, ``lesson N``, ``exercise ...`` and ``quiz``.

Nothing here imports torch at module level: ``shapetrace lessons`` and
``shapetrace exercise list`` read TOML and JSON only. Commands that trace or
check import the engine inside their bodies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .cli import TRACEBACK_HELP, app, guarded, out_console, write_json

exercise_app = typer.Typer(help="Self-study exercises: start, check, hint, solution, watch, reset.",
                           no_args_is_help=True)
app.add_typer(exercise_app, name="exercise")

WORKSPACE_HELP = "Folder of your exercise files (default ./shapetrace-exercises)."


def _curriculum():
    from .exercises.content import load

    return load()


def _progress(console=None):
    from .exercises.progress import Progress

    progress = Progress.load()
    for warning in progress.warnings:
        report_warning(warning)
    return progress


def report_warning(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text.assemble(("warning: ", "bold yellow"), message))


def _rows(curriculum, progress, workspace) -> list[dict]:
    from .exercises.progress import learner_file

    return [{"id": e.id, "title": e.title, "lesson": e.lesson,
             "status": progress.status(e.id, learner_file(workspace, e.id))} for e in curriculum.exercises]


@app.command()
def lessons(
    json_out: bool = typer.Option(False, "--json", help="Print the curriculum as JSON."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The curriculum: every lesson and exercise, with your progress."""
    with guarded(traceback):
        curriculum, progress = _curriculum(), _progress()
        rows = _rows(curriculum, progress, workspace)
        data = [{"lesson": lesson.number, "title": lesson.title, "summary": lesson.summary,
                 "exercises": [r for r in rows if r["lesson"] == lesson.number]}
                for lesson in curriculum.lessons]
        if json_out:
            write_json(json.dumps(data, indent=2))
            return
        from .render.lessons import curriculum_view

        out_console(width).print(curriculum_view(data))


@app.command()
def lesson(
    number: int = typer.Argument(..., help="The lesson number (see `shapetrace lessons`)."),
    run_examples: bool = typer.Option(True, "--run/--no-run", help="Trace the live examples."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    present: bool = typer.Option(False, "--present", help="Show the lesson as screens, one section at a "
                                                          "time (Enter/b/q), for projecting in class."),
    auto: Optional[float] = typer.Option(None, "--auto", metavar="SECONDS",
                                         help="With --present: advance by itself."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Read one lesson: the text, and each live example traced op by op."""
    with guarded(traceback):
        from .errors import UsageError

        if auto is not None and (not present or not auto > 0):
            raise UsageError("--auto SECONDS works with --present and needs a number above 0")
        curriculum, progress = _curriculum(), _progress()
        chosen = curriculum.lesson(number)
        if present:
            _present(chosen, width, auto)
            return
        rows = [r for r in _rows(curriculum, progress, workspace) if r["lesson"] == number]
        from .render.lessons import print_lesson

        print_lesson(chosen, out_console(width), rows, run=run_examples)


def _present(chosen, width: Optional[int], auto: Optional[float]) -> None:
    """Screens on a terminal; elsewhere one line on stderr and the plain lesson."""
    from .classroom import ViewOptions
    from .render.step import step_mode_available

    if not step_mode_available():
        from .cli import err_console
        from .render.lessons import print_lesson

        err_console().print("--present needs an interactive terminal; showing the plain lesson instead",
                            style="yellow", highlight=False)
        print_lesson(chosen, out_console(width), (), run=True)
        return
    from .render.present import present_lesson

    code = present_lesson(chosen, out_console(width), ViewOptions(width=width), auto)
    if code:
        raise typer.Exit(code)


@exercise_app.command("list")
def exercise_list(
    json_out: bool = typer.Option(False, "--json", help="Print the exercises as JSON."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Every exercise, in order, with your progress."""
    with guarded(traceback):
        rows = _rows(_curriculum(), _progress(), workspace)
        if json_out:
            write_json(json.dumps(rows, indent=2))
            return
        from .render.exercise import exercises_table

        out_console(width).print(exercises_table(rows), end="")


@exercise_app.command("start")
def exercise_start(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    force: bool = typer.Option(False, "--force", help="Replace your existing file with the starter."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Copy the exercise's (broken) starter into your workspace."""
    with guarded(traceback):
        from .exercises.progress import start_file

        ex = _curriculum().exercise(exercise_id)
        target = start_file(ex.starter, workspace, ex.id, force=force)
        console = out_console()
        console.print(f"[bold]{ex.title}[/bold] (lesson {ex.lesson})\n{ex.task}")
        console.print(f"your file: [cyan]{target}[/cyan]\nit is broken on purpose: run "
                      f"[bold]shapetrace exercise check {ex.id}[/bold] to see how", highlight=False)


def _check(ex, file: Path, time_limit: float, memory_mb: int, width: int) -> dict:
    from .exercises.checker import check_file

    if not file.is_file():
        from .errors import UsageError

        raise UsageError(f"{file} does not exist: run `shapetrace exercise start {ex.id}` first "
                         "(or pass --workspace)")
    return check_file(ex.id, file, _curriculum().root, time_limit=time_limit, memory_mb=memory_mb,
                      width=width)


@exercise_app.command("check")
def exercise_check(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    file: Optional[Path] = typer.Option(None, "--file", help="Check this file instead of the workspace one."),
    json_out: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    time_limit: float = typer.Option(10.0, "--time-limit", min=0.1, help="Seconds your function may run."),
    memory_mb: int = typer.Option(3072, "--memory-mb", min=512, help="Memory cap of the checker process."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Check your file: exit 0 when it passes, 1 with an explanation when it does not."""
    with guarded(traceback):
        from .exercises.progress import learner_file

        ex = _curriculum().exercise(exercise_id)
        path = file or learner_file(workspace, ex.id)
        console = out_console(width)
        verdict = _check(ex, path, time_limit, memory_mb, console.width)
        progress = _progress()
        progress.record_check(ex.id, verdict["verdict"], path)
        progress.save()
        if json_out:
            write_json(json.dumps(verdict, indent=2))
        else:
            from .render.exercise import print_verdict

            print_verdict(verdict, console, file=str(path))
            if verdict["verdict"] == "pass":
                nxt = _curriculum().next_after(ex.id)
                tip = f"next: shapetrace exercise start {nxt.id}" if nxt else "that was the last exercise"
                console.print(f"[dim]{tip}[/dim]")
        if verdict["verdict"] != "pass":
            raise typer.Exit(1)


@exercise_app.command("hint")
def exercise_hint(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    level: Optional[int] = typer.Option(None, "--level", min=1, help="Show this hint level."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The next hint (each call reveals one more level)."""
    with guarded(traceback):
        from .errors import UsageError
        from .render.exercise import hint_view

        ex = _curriculum().exercise(exercise_id)
        progress = _progress()
        if level is not None and level > len(ex.hints):
            raise UsageError(f"{ex.id} has {len(ex.hints)} hints")
        shown = level or progress.next_hint(ex.id, len(ex.hints))
        progress.save()
        out_console(width).print(hint_view(ex.id, shown, len(ex.hints), ex.hints[shown - 1]))


@exercise_app.command("solution")
def exercise_solution(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    give_up: bool = typer.Option(False, "--give-up", help="Show it without having passed."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The reference solution: after you pass, or with --give-up (bare code when piped)."""
    with guarded(traceback):
        from .errors import UsageError

        ex = _curriculum().exercise(exercise_id)
        if not give_up and not _progress().ever_passed(ex.id):
            raise UsageError(f"pass {ex.id} first (shapetrace exercise check {ex.id}), or ask for "
                             "the answer with --give-up")
        code = ex.solution.read_text(encoding="utf-8")
        if not sys.stdout.isatty():
            sys.stdout.write(code)
            return
        from rich.syntax import Syntax

        out_console(width).print(Syntax(code, "python", theme="ansi_dark", background_color="default"))


@exercise_app.command("reset")
def exercise_reset(
    exercise_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="The exercise id."),
    all_: bool = typer.Option(False, "--all", help="Forget the progress of every exercise."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Forget passes, attempts and hint levels (your files are left alone)."""
    with guarded(traceback):
        from .errors import UsageError

        if bool(exercise_id) == all_:
            raise UsageError("give one exercise id, or --all")
        progress = _progress()
        if all_:
            progress.reset()
        else:
            progress.reset(_curriculum().exercise(exercise_id).id)
        progress.save()
        typer.echo(f"progress reset for {'every exercise' if all_ else exercise_id}")


@exercise_app.command("watch")
def exercise_watch(
    exercise_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="Start here (default: the "
                                                "first exercise not passed)."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help=WORKSPACE_HELP),
    poll: bool = typer.Option(False, "--poll", help="Poll for changes instead of using watchdog."),
    time_limit: float = typer.Option(10.0, "--time-limit", min=0.1, help="Seconds your function may run."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Re-check your file on every save; move on to the next exercise when it passes."""
    with guarded(traceback):
        watch(_curriculum(), workspace, exercise_id, poll=poll, time_limit=time_limit,
              console=out_console(width), progress_loader=_progress)


def watch(curriculum, workspace, exercise_id, poll, time_limit, console, progress_loader) -> None:
    """The watch loop with Rich output (Ctrl-C quits cleanly)."""
    from .exercises.progress import learner_file, start_file
    from .exercises.watch import watch_loop
    from .render.exercise import print_verdict

    progress = progress_loader()
    if exercise_id:
        first = curriculum.exercise(exercise_id).id
    else:
        pending = [e.id for e in curriculum.exercises
                   if progress.status(e.id, learner_file(workspace, e.id)) != "passed"]
        if not pending:
            console.print("[green]every exercise has passed[/green]; `shapetrace exercise reset --all` "
                          "starts over")
            return

        first = pending[0]

    def file_of(ex_id: str) -> Path:
        path = learner_file(workspace, ex_id)
        if not path.exists():
            start_file(curriculum.exercise(ex_id).starter, workspace, ex_id)
        return path

    def announce(ex_id: str, path: Path, mode: str) -> None:
        ex = curriculum.exercise(ex_id)
        console.rule(f"[bold]{ex.id}[/bold] · {ex.title}")
        console.print(f"{ex.task}\nedit [cyan]{path}[/cyan]; checking on every save ({mode}); "
                      "Ctrl-C to stop", highlight=False)

    def check(ex_id: str, path: Path) -> bool:
        ex = curriculum.exercise(ex_id)
        verdict = _check(ex, path, time_limit, 3072, console.width)
        p = progress_loader()
        p.record_check(ex.id, verdict["verdict"], path)
        p.save()
        print_verdict(verdict, console, file=str(path))
        console.print("[dim]waiting for your next save…[/dim]" if verdict["verdict"] != "pass" else "")
        return verdict["verdict"] == "pass"

    try:
        left = watch_loop(first, lambda i: (n.id if (n := curriculum.next_after(i)) else None),
                          file_of, check, announce, poll=poll)
    except KeyboardInterrupt:
        console.print("\nstopped watching; your files and progress are saved")
        return
    if left is None:
        console.print("[bold green]every exercise in the curriculum passes. Well done.[/bold green]")


@app.command()
def quiz(
    topic: Optional[str] = typer.Option(None, "--topic", help="Only questions on this topic (e.g. strides)."),
    count: int = typer.Option(10, "--count", min=1, help="How many questions."),
    answers_from: Optional[Path] = typer.Option(None, "--answers-from", help="Read answers from this file, "
                                                "one per line (for scripts)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Shuffle with this seed (default: a random "
                                       "order at a terminal, file order otherwise)."),
    list_topics: bool = typer.Option(False, "--topics", help="List the topics and exit."),
    width: Optional[int] = typer.Option(None, "--width", help="Render at this many columns."),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Predict shapes, strides, views and copies; each answer is checked against torch."""
    with guarded(traceback):
        from .errors import UsageError
        from .exercises import quiz as qz
        from .exercises.answers import check_answer

        questions = qz.bank(_curriculum().root)
        if list_topics:
            for name in qz.topics(questions):
                typer.echo(f"{name}  ({sum(q.topic == name for q in questions)} questions)")
            return
        if answers_from is not None:
            try:
                answers = iter(answers_from.read_text(encoding="utf-8").splitlines())
            except OSError as exc:
                raise UsageError(f"cannot read --answers-from {answers_from}: {exc.strerror}") from None
        else:
            answers = None
        interactive = answers is None and sys.stdin.isatty()
        if seed is None and interactive:
            import random

            seed = random.randrange(1 << 30)
        chosen = [qz.solve(q) for q in qz.select(questions, topic, count, seed)]
        console = out_console(width)
        from .render.exercise import question_view, quiz_feedback

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
            console.print(quiz_feedback(q, typed, understood, right))
        console.print(f"\n[bold]score: {score}/{asked}[/bold]" + (f" (of {len(chosen)} questions)"
                                                                   if asked < len(chosen) else ""))
        if asked:
            progress = _progress()
            progress.record_quiz(score, asked, topic)
            progress.save()


def _next_answer(answers, interactive: bool) -> Optional[str]:
    if answers is not None:
        return next(answers, None)
    try:
        return input("your answer: " if interactive else "")
    except EOFError:
        return None
