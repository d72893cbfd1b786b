"""Choosing where a traced run puts its tensors: real memory or the meta device.

Meta tensors carry shapes, strides and dtypes but no data, so a 70B-sized
attention (scores alone 2 TiB) traces in milliseconds. ``pick_device`` decides
from the user's ``--device`` and ``--max-memory`` and says why in one note.
Engine module: no Rich; torch is imported only inside the functions that need it.
"""

from __future__ import annotations

import os
import re

from shapetrace.errors import UsageError

DEVICES = ("auto", "cpu", "cuda", "meta")
#: --device when not given: the GPU when one is usable and the run fits, else the CPU (meta beyond the budget)
DEFAULT_DEVICE = "auto"
#: Said when --device cuda is asked for on a machine without a usable GPU.
NO_CUDA = "--device cuda: CUDA is not available here (torch.cuda.is_available() is False); use cpu or meta"
DEFAULT_MAX_MEMORY = "1GiB"
MAX_MEMORY = 1 << 60
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_memory(text: str) -> int:
    """Bytes from ``"1GiB"``, ``"512MiB"``, ``"2G"`` or ``"1000000"``.

    >>> parse_memory("1GiB"), parse_memory("512 MB")
    (1073741824, 512000000)
    """
    text = str(text)
    # plain spaces only: a newline, tab or other control character is not part of a size ('1\n' is no 1 B)
    m = re.fullmatch(r" *(\d{1,30}(?:\.\d{1,30})?) *([a-zA-Z]{0,3}) *", text) if len(text) <= 80 else None
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        shown = repr(text) if len(text) <= 40 else f"(a {len(text)}-character value)"
        raise UsageError(f"cannot read --max-memory {shown}: write a size such as 1GiB, 512MiB or 2GB")
    from fractions import Fraction

    size = int(Fraction(m.group(1)) * _UNITS[unit])
    if size > MAX_MEMORY:
        raise UsageError(f"--max-memory {text.strip()} is more than 1 EiB (2**60 bytes): no machine has that")
    return size


def budget_or_default(max_bytes: int | None) -> int:
    """``max_bytes``, or --max-memory's default (1 GiB) when None."""
    return parse_memory(DEFAULT_MAX_MEMORY) if max_bytes is None else max_bytes


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cuda" and not cuda_available():
        raise UsageError(NO_CUDA)
    return device


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def cuda_fits(estimate: int | None) -> bool:
    """True when a GPU is usable and ``estimate`` bytes are known to fit in its free memory."""
    if estimate is None or not cuda_available():
        return False
    import torch

    free, _total = torch.cuda.mem_get_info()
    return estimate <= free


def cuda_note() -> str:
    import torch

    return f"on the GPU (cuda: {torch.cuda.get_device_name()})"


def pick_device(requested: str, estimate: int | None, budget: int) -> tuple[str, str | None]:
    """(device, note): meta when asked, or when ``auto`` and the estimate exceeds the budget; cuda when
    asked, or when ``auto``, a GPU is available and the run fits in its free memory."""
    from shapetrace.engine.formatting import fmt_bytes

    check_device(requested)
    if requested == "meta":
        return "meta", "on the meta device (--device meta): shapes and strides without data"
    if requested == "auto" and estimate is not None and estimate > budget:
        return "meta", (f"real tensors would take about {fmt_bytes(estimate)}, more than --max-memory "
                        f"{fmt_bytes(budget)}: running on the meta device (shapes and strides, no data)")
    if requested == "cuda" or (requested == "auto" and cuda_fits(estimate)):
        return "cuda", cuda_note()
    ram = physical_memory()
    if estimate is not None and ram and estimate > ram:
        raise UsageError(f"real tensors would take about {fmt_bytes(estimate)} but this machine has "
                         f"{fmt_bytes(ram)}: use --device meta (shapes and strides without data)")
    return "cpu", None


def physical_memory() -> int | None:
    """Bytes of RAM, or None where the OS does not say."""

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
