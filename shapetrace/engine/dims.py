"""Named sizes as the user writes them (``"B=2 T=6 D=512 H=8"``): parsed without importing torch."""

from __future__ import annotations

from collections.abc import Mapping

from shapetrace.errors import UsageError


def whole_number(text: str) -> bool:
    """True for ASCII digits only: ``str.isdigit`` also takes ``'²'``, which ``int`` then refuses.

    >>> whole_number("12"), whole_number("²"), whole_number("")
    (True, False, False)
    """
    return text.isascii() and text.isdigit()


def parse_dims(dims: str | Mapping[str, int] | None) -> dict[str, int]:
    """Named sizes from ``"B=2 T=6 D=512 H=8"``, ``"B=2,T=6"`` or a mapping.

    >>> parse_dims("B=2,T=6 D=512")
    {'B': 2, 'T': 6, 'D': 512}
    """
    if dims is None:
        return {}
    if isinstance(dims, Mapping):
        return {str(k): int(v) for k, v in dims.items()}
    out: dict[str, int] = {}
    for item in dims.replace(",", " ").split():
        key, sep, value = item.partition("=")
        name, _, role = key.partition(":")
        if not sep or not name.isidentifier() or (role and not role.isidentifier()) or not whole_number(value) \
                or int(value) < 1:
            raise UsageError(f"cannot read {item!r} in dims {dims!r}: write NAME=SIZE pairs such as "
                             f"'B=2,T=6,D=512,H=8', or NAME:ROLE=SIZE such as 'ctx:tokens=6' "
                             f"(sizes are whole numbers of at least 1)")
        if key in out:
            raise UsageError(f"dims {dims!r} give {key} twice ({key}={out[key]}, then {key}={int(value)}): "
                             "give each name once")
        out[key] = int(value)
    return out
