"""One error family for the whole tool.

The engine raises these and never prints or exits; the CLI turns them into one
message on stderr and an exit code (2 for usage errors, 1 for a failed run).
"""


class ShapetraceError(Exception):
    """Base of every error shapetrace raises on purpose."""

    exit_code = 1


class UsageError(ShapetraceError):
    """The user asked for something that cannot work (bad option, bad shape, bad chain)."""

    exit_code = 2


class RunError(ShapetraceError):
    """The traced code itself failed (the exception is kept as ``__cause__``)."""

    exit_code = 1


class CheckerError(ShapetraceError):
    """The exercise checker itself failed or refused to run (not the learner's code): no verdict, nothing
    recorded (raised by :mod:`shapetrace.exercises`)."""

    exit_code = 2


class CheckerRefused(CheckerError):
    """The checker refuses to run any learner code here (started as root without bubblewrap, where nobody
    cannot run the interpreter): no file can be checked, so a grading stops at once, in one line."""
