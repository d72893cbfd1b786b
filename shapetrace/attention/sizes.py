"""Sizes as options give them: a whole number from 1 to 2**40, checked in one line (no torch)."""

from __future__ import annotations

from shapetrace.errors import UsageError

#: The largest size shapetrace passes to torch: every element count must stay below 2**63.
MAX_SIZE = 2**40


def shown(value: int) -> str:
    """A number as typed, or roughly how long it is when it is too long to print."""
    if value.bit_length() <= 133:  # up to 40 digits: printed as typed
        return str(value)
    return f"{'-' if value < 0 else ''}(a number of about {int(value.bit_length() * 0.30103) + 1} digits)"


def check_size(flag: str, value) -> None:
    """A size is a whole number from 1 to 2**40: one line that names ``flag`` otherwise.

    >>> check_size("--kv-len", 10 ** 400)
    Traceback (most recent call last):
    ...
    shapetrace.errors.UsageError: --kv-len (a number of about 401 digits) is too large: sizes go up to ...
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        got = shown(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)
        raise UsageError(f"{flag} must be a whole number of at least 1, got {got}")
    if value > MAX_SIZE:
        raise UsageError(f"{flag} {shown(value)} is too large: sizes go up to 2**40 ({MAX_SIZE})")
