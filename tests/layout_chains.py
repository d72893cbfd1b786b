"""Random layouts for property tests: a contiguous base and a chain of permutes, transposes, views,
slices and expands on it (shared by tests/engine/test_layout.py and tests/app/test_strides.py)."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st


def factorisations(n: int) -> list[tuple[int, ...]]:
    """A few ways to write n as a product (for random views)."""
    divs = [d for d in range(2, n + 1) if n % d == 0]
    out = [(n,)]
    for d in divs:
        if d < n:
            out.append((d, n // d))
            for e in [e for e in range(2, n // d + 1) if (n // d) % e == 0 and e < n // d]:
                out.append((d, e, n // d // e))
    return out


@st.composite
def chains(draw):
    """A contiguous base tensor and a random chain of permutes, transposes, valid views,
    slices and expands applied to it."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    heads = draw(st.sampled_from([None, 2, 3]))
    base = torch.arange(math.prod(shape), dtype=torch.float32)
    t = base.view(shape)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["permute", "transpose", "view", "narrow", "select", "expand"]))
        if kind == "permute" and t.dim() > 1:
            t = t.permute(draw(st.permutations(range(t.dim()))))
        elif kind == "transpose" and t.dim() > 1:
            a, b = draw(st.integers(0, t.dim() - 1)), draw(st.integers(0, t.dim() - 1))
            t = t.transpose(a, b)
        elif kind == "view":
            target = draw(st.sampled_from(factorisations(t.numel()))) if t.numel() > 1 else (1,)
            try:
                t = t.view(target)
            except RuntimeError:
                pass  # not expressible as a view: the chain goes on without it
        elif kind == "narrow" and t.dim() and t.shape[-1] > 1:
            d = draw(st.integers(0, t.dim() - 1))
            if t.shape[d] > 1:
                start = draw(st.integers(0, t.shape[d] - 1))
                t = t.narrow(d, start, draw(st.integers(1, t.shape[d] - start)))
        elif kind == "select" and t.dim() > 1:
            d = draw(st.integers(0, t.dim() - 1))
            t = t.select(d, draw(st.integers(0, t.shape[d] - 1)))
        elif kind == "expand" and 1 in t.shape:
            d = t.shape.index(1)
            t = t.expand(*[3 if i == d else -1 for i in range(t.dim())])
    names = draw(st.sampled_from([None, "letters"]))
    dims = None if names is None else [("H", "T", "D", "d_k", "B")[i % 5] for i in range(t.dim())]
    return base, t, heads, dims
