"""Where the lessons live: one answer for the curriculum loader, the digests and the sandbox."""

from __future__ import annotations

import os
from pathlib import Path


def lessons_root() -> Path:
    """``$SHAPETRACE_LESSONS`` or the ``lessons/`` folder next to the package."""
    env = os.environ.get("SHAPETRACE_LESSONS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "lessons"
