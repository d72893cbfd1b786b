"""engine/sizes.py and engine/infer/sizes.py: sizes read with ``x.size(i)`` carry that axis to what is built
from them. Each case fails on the engine before (noted per test); correct twins stay silent."""

import pickle

import pytest
import torch
import torch.nn as nn

import shapetrace
from shapetrace.engine.sizes import SizeOf


def kinds(t):
    return [d.kind for d in t.diagnostics if d.kind != "ambiguous-sizes"]


def test_a_size_read_while_tracing_is_an_int_that_remembers_its_axis():
    x = torch.randn(2, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2"):
        n = x.size(1)
        whole = x.size()
    assert type(n) is SizeOf and n == 6 and n.axis == 1 and repr(n) == "6"
    assert type(n + 1) is int and type(whole) is torch.Size
    assert pickle.loads(pickle.dumps(n)) == 6 and type(pickle.loads(pickle.dumps(n))) is int
    assert type(x.size(1)) is int   # outside a trace: torch's own int


@pytest.mark.parametrize("read,bug", [(0, True), (1, False)])
def test_positions_from_the_batch_size_on_batch_first_input_are_a_finding(read, bug):
    """The seq-first habit ``pos = torch.arange(x.size(0))`` (PyTorch's word-language-model
    PositionalEncoding reads ``x.size(0)`` for tokens of a ``[T, B, D]`` input) applied to a batch-first
    ``[B, T, D]`` input, with a learned position table (GPT-2's ``wpe``): at B = T the positions count
    batch entries and torch broadcasts them onto the tokens. Before: no finding (``arange`` unnamed).
    The twin reads ``x.size(1)``: silent."""
    x = torch.randn(4, 4, 32)                                   # (B, T, D)
    wpe = nn.Embedding(16, 32)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        pos = torch.arange(x.size(read))                        # (B,) — or (T,) in the twin
        y = x + wpe(pos)                                        # (B, T, D) + (B, D) or (T, D)
    assert y.shape == (4, 4, 32)
    assert [e.output.dims for e in t.events if e.op == "embedding"] == [(("B", "T")[read], "D")]
    assert kinds(t) == (["broadcast-mismatch"] if bug else [])


def test_a_class_token_expanded_over_the_batch_is_named_batch():
    """timm's VisionTransformer: ``self.cls_token.expand(x.shape[0], -1, -1)`` (here with ``x.size(0)``,
    which carries its axis; ``x.shape[0]`` does not). Before: ``expand`` gave ``[None, None, None]``."""
    x = torch.randn(2, 6, 32)                                   # (B, N, D)
    cls_token = nn.Parameter(torch.zeros(1, 1, 32))             # (1, 1, D)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        cls = cls_token.expand(x.size(0), -1, -1)               # (B, 1, D)
        torch.cat((cls, x), dim=1)                              # (B, 1+T, D)
    assert [e.output.dims[0] for e in t.events if e.op == "expand"] == ["B"]


def test_a_causal_mask_built_from_token_counts_has_token_axes_at_equal_sizes():
    """nanoGPT-style ``torch.ones(T, T).tril()`` with ``T = x.size(1)``: ``[T, T]`` even where B = T = H,
    where sizes alone are ambiguous. Before: an ambiguous size guess."""
    x = torch.randn(4, 4, 16)
    with shapetrace.trace(dims="B=4 T=4 D=16 H=4") as t:
        T = x.size(1)
        torch.ones(T, T).tril()
    assert [e.output.dims for e in t.events if e.op == "tril"] == [("T", "T")]


def test_sizes_not_read_from_an_axis_name_nothing():
    """``arange(n + 1)``, ``arange(1, n)`` and a literal size carry no axis: unnamed, never guessed."""
    x = torch.randn(2, 6, 8)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2") as t:
        n = x.size(1)
        a = torch.arange(n + 1)
        b = torch.arange(1, n)
        c = torch.zeros(n, 3)
        for made in (a, b, c):
            made.flip(0)
    assert [e.output.dims for e in t.events if e.op == "flip"] == [(None,), (None,), (None, None)]
