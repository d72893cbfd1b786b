"""One intra-op thread for small work (no Rich; torch imported inside).

shapetrace's own runs (the reference, a variant, the leak check, compare) multiply matrices of a few
hundred rows. For those, torch's thread pool costs more than it saves, and on a busy machine far more:
a [128, 512] @ [512, 512] linear took 15.5 ms with 2 threads and 0.73 ms with 1 while other processes
held the cores. Large work keeps every thread. A user's own script (``shapetrace trace``) is never
changed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: Up to this many bytes of tensors, one thread is faster (and far steadier) than several.
SMALL_WORK_BYTES = 64 << 20


@contextlib.contextmanager
def threads_for(work_bytes: int | None) -> Iterator[None]:
    """Run the block with one torch thread when ``work_bytes`` is small; restore the count after."""
    import torch

    if work_bytes is None or work_bytes > SMALL_WORK_BYTES:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
