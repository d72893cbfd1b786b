"""``shapetrace exercise ...``: start, check, hint, solution, reset and watch an exercise.

Nothing here imports torch at module level; checking runs the learner's code in a child process.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import typer

from shapetrace.app.exportpath import check_name_lengths, write_atomically
from shapetrace.app.textinput import check_regular
from shapetrace.cli.common import (
    TRACEBACK_HELP,
    err_console,
    guarded,
    out_console,
    path_option,
    state_dir_option,
    time_limit_option,
    width_option,
    workspace_option,
    write_json,
)
from shapetrace.cli.lessons import WORKSPACE_HELP, exercise_rows, load_curriculum, load_progress, update_progress
from shapetrace.errors import RunError, ShapetraceError, UsageError

exercise_app = typer.Typer(help="Self-study exercises: start, check, hint, solution, watch, reset.",
                           no_args_is_help=True)


@exercise_app.command("list")
def exercise_list(
    json_out: bool = typer.Option(False, "--json", help="Print the exercises as JSON."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    width: int | None = width_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Every exercise, in order, with your progress."""
    with guarded(traceback):
        rows = exercise_rows(load_curriculum(), load_progress(), workspace)
        if json_out:
            write_json(json.dumps(rows, indent=2))
            return
        from shapetrace.render.exercise import exercises_table

        out_console(width).print(exercises_table(rows))


@exercise_app.command("start")
def exercise_start(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    force: bool = typer.Option(False, "--force", help="Replace your existing file with the starter."),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Copy the exercise's (broken) starter into your workspace."""
    with guarded(traceback):
        from shapetrace.exercises.progress import start_file

        ex = load_curriculum().exercise(exercise_id)
        target = start_file(ex.starter, workspace, ex.id, force=force)
        console = out_console()
        console.print(f"[bold]{ex.title}[/bold] (lesson {ex.lesson})\n{ex.task}")
        console.print(f"your file: [cyan]{target}[/cyan]\nit is broken on purpose: run "
                      f"[bold]shapetrace exercise check {ex.id}[/bold] to see how", highlight=False)


#: ``--all`` of check and watch: the traced table's calls without a row of their own
#: What --csv and --gradebook want (said when one is given empty).
STDOUT_OR_FILE = "a file name, or - for standard output"
#: What --file wants.
YOUR_FILE = "your exercise's .py file"
ALL_OPS_HELP = ("Show every op in your function's traced table, also the calls without a row of their own "
                "(elementwise math, casts).")


def _check(ex, file: Path, time_limit: float, memory_mb: int, width: int, show_all: bool = False) -> dict:
    from shapetrace.exercises.checker import check_file

    _check_learner_file(ex, file)
    show = _progress_line(ex.kind)
    try:
        return check_file(ex.id, file, load_curriculum().root, time_limit=time_limit, memory_mb=memory_mb,
                          width=width, progress=show, show_all=show_all)
    finally:
        if show is not None:
            sys.stderr.write("\r\033[K")   # the progress line goes before the verdict is printed
            sys.stderr.flush()


def _check_learner_file(ex, file: Path) -> None:
    """One line unless ``file`` is a regular file: missing (start it first), a folder, or a FIFO or device
    (which said "does not exist" and asked for ``exercise start``, though it does exist)."""
    if not os.path.exists(file):
        raise UsageError(f"{file} does not exist: run `shapetrace exercise start {ex.id}` first "
                         "(or pass --workspace)")
    if os.path.isdir(file):
        raise UsageError(f"{file} is a folder, not your exercise file: give the .py file "
                         f"({ex.id.replace('-', '_')}.py, from `shapetrace exercise start {ex.id}`)")
    check_regular(str(file), "your file")


def _progress_line(kind: str):
    """On a terminal, one line on stderr that says how far the check is: ``checking case 3 of 12...``
    (for a test you wrote: ``running your test on implementation 2 of 5...``)."""
    if not sys.stderr.isatty():
        return None
    what = "running your test on implementation" if kind == "test" else "checking case"

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\r\033[K{what} {done} of {total}...")
        sys.stderr.flush()

    return show


def _id_and_file(exercise_id: str, file: Path | None) -> tuple[str, Path | None]:
    """``exercise check path/to/split_heads.py`` means the exercise split-heads, checked in that file."""
    if file is not None or not (exercise_id.endswith(".py") or "/" in exercise_id):
        return exercise_id, file
    path = Path(exercise_id)
    return path.stem.replace("_", "-"), path


def next_tip(done_id: str, workspace) -> str:
    """What to do next after a pass: the first exercise not passed yet, after this one in the course
    (then from the start); ``check`` when its file is already in the workspace, ``start`` otherwise."""
    from shapetrace.exercises.progress import learner_file

    curriculum, progress = load_curriculum(), load_progress(quiet=True)
    ids = [e.id for e in curriculum.exercises]
    at = ids.index(done_id)
    for ex_id in ids[at + 1:] + ids[:at]:
        target = learner_file(workspace, ex_id)
        if progress.status(ex_id, target) == "passed":
            continue
        if target.exists():
            return f"next: shapetrace exercise check {ex_id} (your file {target} is there already)"
        return f"next: shapetrace exercise start {ex_id}"
    return "every exercise is passed"


@exercise_app.command("check")
def exercise_check(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id (or the path of your file, "
                                      "e.g. shapetrace-exercises/split_heads.py)."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    file: Path | None = path_option(None, "--file", what=YOUR_FILE,
                                    help="Check this file instead of the workspace one."),
    json_out: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    time_limit: float = time_limit_option(),
    memory_mb: int = typer.Option(3072, "--memory-mb", min=256, max=1 << 20,
                                  help="Memory your function may use (on top of what the checker needs)."),
    width: int | None = width_option(),
    all_ops: bool = typer.Option(False, "--all", help=ALL_OPS_HELP),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Check your file: exit 0 when it passes, 1 with an explanation when it does not."""
    with guarded(traceback):
        from shapetrace.exercises.progress import learner_file

        exercise_id, file = _id_and_file(exercise_id, file)
        ex = load_curriculum().exercise(exercise_id)
        path = file or learner_file(workspace, ex.id)
        console = out_console(width)
        verdict = _check(ex, path, time_limit, memory_mb, console.width, all_ops)
        update_progress(lambda p: p.record_check(ex.id, verdict["verdict"], path))
        if json_out:
            write_json(json.dumps(verdict, indent=2))
        else:
            from shapetrace.render.exercise import print_verdict

            print_verdict(verdict, console, file=str(path))
            if verdict["verdict"] == "pass":
                console.print(f"[dim]{next_tip(ex.id, workspace)}[/dim]")
        if verdict["verdict"] != "pass":
            raise typer.Exit(1)


@exercise_app.command("grade", context_settings={"allow_extra_args": True})
def exercise_grade(
    ctx: typer.Context,
    submissions: str = typer.Argument(..., metavar="SUBMISSIONS",
                                      help="A folder with one folder per student, each holding exercise files "
                                           "(split_heads.py, ...)."),
    exercises: str | None = typer.Option(None, "--exercises", metavar="ID,ID",
                                         help="The exercises assigned (split-heads,head-dim): one column each, "
                                              "and each score is out of them. Default: every exercise someone "
                                              "handed in."),
    gradebook: Path | None = path_option(None, "--gradebook", metavar="FILE.csv", what=STDOUT_OR_FILE,
                                          help="Also write a gradebook: one row per student, one column per "
                                               "exercise, then passed, out_of and score (percent) ('-': standard "
                                               "output, instead of the table)."),
    csv_out: Path | None = path_option(None, "--csv", metavar="FILE", what=STDOUT_OR_FILE,
                                        help="Also write every cell as CSV, one row per student and exercise with "
                                             "the verdict in full ('-': standard output, instead of the table)."),
    json_out: bool = typer.Option(False, "--json", help="Print the grade as JSON on standard output (instead of "
                                  "the table); --json-file FILE writes it to a file."),
    json_file: Path | None = path_option(None, "--json-file", metavar="FILE", what="a file name",
                                          help="Also write the grade as JSON to this file."),
    force: bool = typer.Option(False, "--force", help="Let --csv, --gradebook and --json-file replace existing "
                               "files."),
    workers: int | None = typer.Option(None, "--workers", min=1, max=64,
                                       help="Files checked at once, each on its own share of the cores (default: half "
                                       "the machine's cores)."),
    time_limit: float = time_limit_option(),
    memory_mb: int = typer.Option(1024, "--memory-mb", min=256, max=1 << 20,
                                  help="Memory each student's function may use (on top of what the checker needs)."),
    width: int | None = width_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Grade a class: every student's files, each in the checker's sandbox; a table of student x exercise."""
    with guarded(traceback):
        from shapetrace.exercises.grade import parse_assigned, survey

        root = _one_folder([submissions, *ctx.args], json_out)
        reports = _report_targets(csv_out, gradebook, json_file, json_out, force)
        ids = [e.id for e in load_curriculum().exercises]
        assigned = parse_assigned(exercises, ids) if exercises is not None else None
        survey(root, ids, assigned)  # an empty or missing folder is a usage error before anything runs
        result = _grade_with_progress(root, time_limit, memory_mb, workers, assigned)
        to_stdout = _write_reports(result, reports, force)
        if json_out:
            write_json(json.dumps(result.to_json(), indent=2))
        elif not to_stdout:
            from shapetrace.render.grade import grade_view

            out_console(width).print(grade_view(result))
        _fail_if_unchecked(result.cells)


def _fail_if_unchecked(cells: list) -> None:
    """Exit 1, with one line, when any cell's file was not checked (the grade is then incomplete)."""
    from shapetrace.exercises.recovery import unchecked

    missed = unchecked(cells)
    if missed:
        names = ", ".join(f"{c.student}/{Path(c.file).name}" for c in missed[:5]) + (" ..." if len(missed) > 5 else "")
        err_console().print(f"{len(missed)} of the class's files were not checked: {names}", highlight=False,
                            markup=False)
        raise typer.Exit(1)


def _one_folder(submissions: list[str], json_out: bool) -> Path:
    """The one folder of submissions; a usage error for none, an empty name, or more than one (the old
    ``--json FILE`` spelling left a file name behind: --json is a flag now, as on every command)."""
    if len(submissions) > 1:
        if json_out:
            named = [x for x in submissions if not Path(x).is_dir()] or submissions[1:]
            where = "--json alone prints it there" if named[0] == "-" else f"to write it to a file use --json-file " \
                f"{named[0]}"
            raise UsageError(f"--json prints the grade as JSON on standard output and takes no file name; {where}")
        raise UsageError(f"give one folder of submissions; got {len(submissions)}: {', '.join(submissions)}")
    if not submissions[0].strip():
        raise UsageError("SUBMISSIONS is empty: give the folder of submissions (one folder per student)")
    return Path(submissions[0])


def _report_targets(csv_out: Path | None, gradebook: Path | None, json_file: Path | None, json_out: bool,
                    force: bool) -> dict[str, Path]:
    """The reports asked for, by flag, each checked before anything is graded: at most one on standard
    output, and no existing file replaced without --force."""
    targets = {flag: path for flag, path in (("--csv", csv_out), ("--gradebook", gradebook),
                                             ("--json-file", json_file)) if path is not None}
    on_stdout = [flag for flag, path in targets.items() if str(path) == "-"] + (["--json"] if json_out else [])
    if len(on_stdout) > 1:
        raise UsageError(f"only one of {', '.join(on_stdout)} can print on standard output; write the others to "
                         "files")
    if "--json-file" in targets and str(targets["--json-file"]) == "-":
        raise UsageError("--json-file -: to print the JSON on standard output use --json")
    files = [(flag, path) for flag, path in targets.items() if str(path) != "-"]
    for flag, path in files:
        _check_target(flag, path, force)
    resolved = [p.resolve() for _, p in files]
    if len(set(resolved)) < len(resolved):
        raise UsageError(f"{' and '.join(f for f, _ in files)} name the same file; give each its own")
    return targets


def _check_target(flag: str, path: Path, force: bool) -> None:
    check_name_lengths(flag, path)
    if path.is_dir():
        raise UsageError(f"{flag} {path}: that is a folder; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {path.parent} does not exist")
    if os.path.lexists(path) and not force:
        raise UsageError(f"{flag} {path}: a file with that name exists; add --force to replace it")
    if not os.access(path.parent, os.W_OK):   # (else found after the whole class was graded)
        raise UsageError(f"{flag} {path}: cannot write in the folder {path.parent}")


def _grade_with_progress(root: Path, time_limit: float, memory_mb: int, workers: int | None,
                         assigned: list[str] | None):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from shapetrace.exercises.grade import grade_class

    with Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console(), transient=True) as bar:
        task = bar.add_task("grade", total=None)

        def done(cell, n: int, total: int) -> None:
            bar.update(task, completed=n, total=total)

        return grade_class(root, load_curriculum().root, time_limit, memory_mb, workers, on_done=done,
                           exercises=assigned)


def _write_reports(result, targets: dict[str, Path], force: bool) -> bool:
    """Write --csv, --gradebook and --json-file; True when one went to standard output (no table then)."""
    from shapetrace.exercises.grade import csv_text, gradebook_text

    texts = {"--csv": lambda: csv_text(result.cells), "--gradebook": lambda: gradebook_text(result),
             "--json-file": lambda: json.dumps(result.to_json(), indent=2) + "\n"}
    to_stdout = False
    for flag, path in targets.items():
        if str(path) == "-":
            sys.stdout.write(texts[flag]())
            sys.stdout.flush()
            to_stdout = True
        else:
            write_atomically(path, texts[flag](), force=force, flag=flag)
    return to_stdout


@exercise_app.command("hint")
def exercise_hint(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    level: int | None = typer.Option(None, "--level", min=1, help="Show this hint level (your file is not "
                                     "checked)."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    file: Path | None = path_option(None, "--file", what=YOUR_FILE, help="Take the hint for this file instead of the "
                                    "workspace one."),
    time_limit: float = time_limit_option(),
    width: int | None = width_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The next hint about what your file gets wrong now (it is checked first; hints about a fault it
    does not have are skipped, and the hint says so)."""
    with guarded(traceback):
        from shapetrace.exercises.progress import learner_file
        from shapetrace.render.exercise import hint_view

        ex = load_curriculum().exercise(exercise_id)
        if level is not None and level > len(ex.hints):
            raise UsageError(f"{ex.id} has {len(ex.hints)} hints")
        console = out_console(width)
        if level is not None:
            console.print(hint_view(ex.id, level, len(ex.hints), ex.hints[level - 1]))
            return
        path = file or learner_file(workspace, ex.id)
        if file is not None or os.path.lexists(path):   # (a typo in --file, a folder, a FIFO: said as check says
            _check_learner_file(ex, path)               # it, exit 2, and no hint is taken)
        verdict, problem = _verdict_for_hint(ex, path, time_limit, console.width)
        show_hint(ex, verdict, problem, console)


def _verdict_for_hint(ex, path: Path, time_limit: float, width: int) -> tuple[dict | None, str]:
    """The verdict of ``path`` now, or None and why there is none (no file yet, the check could not run)."""

    if not os.path.exists(path):   # (the workspace's file, not made yet: hints still help)
        return None, f"you have no file yet ({path}; shapetrace exercise start {ex.id})"
    try:
        return _check(ex, path, time_limit, 3072, width), ""
    except ShapetraceError as exc:
        return None, f"your file could not be checked ({exc})"


def show_hint(ex, verdict: dict | None, problem: str, console) -> None:
    """Reveal one more hint (recorded in progress) and print the one about ``verdict``'s fault, with
    why it is the one shown. The one code path for ``exercise hint`` and the h key of ``exercise watch``."""
    from shapetrace.app.hints import choose
    from shapetrace.render.exercise import hint_view

    if verdict is not None and verdict["verdict"] == "pass":
        console.print(f"your file passes {ex.id}: no hint needed (shapetrace exercise hint {ex.id} --level N "
                      "shows one anyway)", highlight=False, markup=False)
        return
    choice = choose(ex, take_hint(ex), verdict, problem)
    console.print(hint_view(ex.id, choice.number, len(ex.hints), ex.hints[choice.number - 1], why=choice.why))


def take_hint(ex) -> int:
    """Reveal one more hint of ``ex`` and record it, under the progress lock; the new level (1-based)."""
    levels: list[int] = []
    update_progress(lambda p: levels.append(p.next_hint(ex.id, len(ex.hints))))
    return levels[0]


@exercise_app.command("solution")
def exercise_solution(
    exercise_id: str = typer.Argument(..., metavar="ID", help="The exercise id."),
    give_up: bool = typer.Option(False, "--give-up", help="Show it without having passed."),
    width: int | None = width_option(),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """The reference solution: after you pass, or with --give-up (bare code when piped)."""
    with guarded(traceback):
        ex = load_curriculum().exercise(exercise_id)
        if not give_up and not load_progress().ever_passed(ex.id):
            raise UsageError(f"pass {ex.id} first (shapetrace exercise check {ex.id}), or ask for "
                             "the answer with --give-up")
        code = ex.solution.read_text(encoding="utf-8")
        if not sys.stdout.isatty():
            sys.stdout.write(code)
            return
        from rich.syntax import Syntax
        from rich.text import Text

        from shapetrace.exercises.reference import reference_trace
        from shapetrace.render.table import OpTable

        console = out_console(width)
        console.print(Syntax(code, "python", theme="ansi_dark", background_color="default"))
        trace, sizes = reference_trace(ex)
        if trace is not None and trace.events:
            console.print(Text(f"the reference, traced ({sizes}):", style="bold"))
            console.print(OpTable(trace.events))


@exercise_app.command("reset")
def exercise_reset(
    exercise_id: str | None = typer.Argument(None, metavar="[ID]", help="The exercise id."),
    all_: bool = typer.Option(False, "--all", help="Forget the progress of every exercise."),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Forget passes, attempts and hint levels (your files are left alone)."""
    with guarded(traceback):
        if bool(exercise_id) == all_:
            raise UsageError("give one exercise id, or --all")
        target = None if all_ else load_curriculum().exercise(exercise_id).id
        progress = update_progress(lambda p: p.reset(target), quiet=True)
        if not progress.saved:   # (resetting is all this command does: not done is a failed run)
            from shapetrace.exercises.progress import NOT_KEPT, NOT_SAVED

            why = next(w for w in reversed(progress.warnings) if w.endswith((NOT_KEPT, NOT_SAVED)))
            raise RunError(f"progress not reset: {why.removesuffix(NOT_KEPT).removesuffix(NOT_SAVED)}")
        typer.echo(f"progress reset for {'every exercise' if all_ else exercise_id}")


@exercise_app.command("watch")
def exercise_watch(
    exercise_id: str | None = typer.Argument(None, metavar="[ID]", help="Start here (default: the "
                                                "first exercise not passed)."),
    workspace: Path | None = workspace_option(WORKSPACE_HELP),
    poll: bool = typer.Option(False, "--poll", help="Poll for changes instead of using watchdog."),
    time_limit: float = time_limit_option(),
    width: int | None = width_option(),
    all_ops: bool = typer.Option(False, "--all", help=ALL_OPS_HELP),
    state_dir: Path | None = state_dir_option(),
    traceback: bool = typer.Option(False, "--traceback", help=TRACEBACK_HELP),
) -> None:
    """Re-check your file on every save; move on to the next exercise when it passes."""
    with guarded(traceback):
        from shapetrace.tui.watch import watch_exercises

        def record(ex_id: str, verdict: str, path: Path) -> None:
            update_progress(lambda p: p.record_check(ex_id, verdict, path))

        watch_exercises(load_curriculum(), workspace, exercise_id, poll=poll, time_limit=time_limit,
                        console=out_console(width), progress_loader=load_progress,
                        check_file=functools.partial(_check, show_all=all_ops),
                        record=record, show_hint=show_hint)
