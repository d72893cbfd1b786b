"""A call site is recorded as the frame's bytecode offset (``f_lasti``) and its line found later
(:func:`shapetrace.engine.sites.line_at`): the line must be the one ``f_lineno`` gives, on every frame."""

from __future__ import annotations

import sys

import torch

import shapetrace
from shapetrace.engine.sites import line_at


def _multi_line_forward(x):
    y = (x
         .view(2, 5, 4, 4)       # (B, T, H, d_k)
         .transpose(1, 2))       # (B, H, T, d_k)
    z = [t for t in (y, y)][0] if y is not None else None
    return (z @ z.transpose(-2, -1)).softmax(-1)                   # (B, H, T, T)


def test_the_line_found_from_the_offset_is_f_lineno_on_every_frame_seen():
    seen, wrong = 0, []

    def check(frame, event, arg):   # the frame making each call, and its caller
        nonlocal seen
        for f in (frame, frame.f_back):
            if f is not None:
                seen += 1
                if line_at(f.f_code, f.f_lasti) != f.f_lineno:
                    wrong.append((f.f_code.co_qualname, f.f_lasti, f.f_lineno))

    model = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    sys.setprofile(check)
    try:
        with shapetrace.trace(dims="B=2 T=5 D=16 H=4") as t:
            x = torch.randn(2, 5, 16)                                   # (B, T, D)
            model(x, x, x)
            _multi_line_forward(torch.randn(2, 5, 16))
        t.to_dict()
    finally:
        sys.setprofile(None)
    assert seen > 2_000 and wrong == []


def test_a_call_split_over_lines_is_cited_at_the_line_torch_reports():
    with shapetrace.trace(dims="B=2 T=5 D=16 H=4") as t:
        _multi_line_forward(torch.randn(2, 5, 16))
    first_line = _multi_line_forward.__code__.co_firstlineno
    by_op: dict[str, str] = {}
    for e in t.events:
        by_op.setdefault(e.op, e.source)   # the first of each op
    name = "engine/" + __file__.rsplit("/", 1)[-1]
    assert by_op["view"] == f"tests/{name}:{first_line + 2}"
    assert by_op["transpose"] == f"tests/{name}:{first_line + 3}"
    assert by_op["softmax"] == f"tests/{name}:{first_line + 5}"
