"""The backward's text (:mod:`shapetrace.render.backward`): the forward table's columns for each gradient
that arrives, a line per gradient sent back with its memory word, the registry's sentence, and what
autograd keeps."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

import shapetrace
from shapetrace.attention.reference import MultiHeadAttention
from shapetrace.render.backward import BackwardView


def _rendered(D: int, H: int, T: int, width: int) -> str:
    """The reference's backward (B = 2) as BackwardView prints it at ``width`` columns, without colour."""
    torch.manual_seed(0)
    model, x = MultiHeadAttention(D, H), torch.randn(2, T, D)
    with shapetrace.trace(f"B=2 T={T} D={D} H={H}", backward=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(BackwardView(t.backward))
    return console.file.getvalue()


@pytest.fixture(scope="module")
def text() -> str:
    # the reference (the Annotated Transformer's MultiHeadedAttention, one reshaping step per line) at small sizes
    return _rendered(16, 2, 3, width=100)


def _block(text: str, first: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return [line.rstrip() for line in lines[start:end]]


def test_a_linear_block_shows_the_weight_grad_named_and_summed_over_batch_and_tokens(text):
    assert _block(text, " 0  grad #16 linear") == [
        " 0  grad #16 linear      [B=2, T=3, D=16]        (0, 0, 0)       4 B",
        "    → operand 0  [B=2, T=3, D=16]  (48, 16, 1)  new 384 B",
        "    → w_o.bias  [D=16]  (1)  new 64 B",
        "    → w_o.weight  [D=16, D=16]  (16, 1)  new 1 KiB",
        "    dY [B, T, D]; dx = dY · W [B, T, D]; dW = dYᵀ · x, summed over B, T: [D, D]; db = dY summed over",
        "    B, T: [D]",
    ]


def test_the_split_heads_view_copies_in_the_backward_where_the_transposed_grad_cannot_be_viewed(text):
    # the copy that `contiguous` spared the forward comes back: q.view(B, T, H, d_k)'s grad arrives transposed
    assert _block(text, "10  grad #7 view") == [
        "10  grad #7 view         [B=2, T=3, H=2, d_k=8]  (48, 8, 24, 1)  384 B",
        "    → operand 0  [B=2, T=3, D=16]  (48, 16, 1)  new 384 B",
        "    the incoming grad [B, T, H, d_k] is reshaped back to [B, T, D]: a copy, since the strides do not",
        "    allow a view",
    ]
    assert _block(text, " 2  grad #14 contiguous")[1] == \
        "    → operand 0  [B=2, T=3, H=2, d_k=8]  (48, 16, 8, 1)  the same tensor"


def test_what_autograd_keeps_is_summed_by_storage_with_the_weights_share(text):
    lines = [line.rstrip() for line in text.splitlines()]
    start = lines.index("autograd keeps 10 tensors for the backward: 3.0 KiB in 7 storages (2.0 KiB of them not "
                        "parameters)")
    assert lines[start + 1] == "  attention weights: 144 B, 7% of what is not parameters"
    assert "   5 #11 softmax  SoftmaxBackward0  [B=2, H=2, T=3, T=3]  144 B" in lines
    assert "   7 #12 matmul  BmmBackward0  [4, 3, 3]  view of saved 5" in lines
    assert "   9 #16 linear  AddmmBackward0  [16, 16]  1 KiB, a parameter" in lines


def test_at_80_columns_the_saved_totals_wrap_under_their_own_indent():
    # run --backward's default sizes read at 80 columns: a summary line too long for the terminal continues
    # two spaces further in, never from column 0
    lines = [line.rstrip() for line in _rendered(512, 8, 6, width=80).splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("autograd keeps"))
    assert lines[start:start + 3] == [
        "autograd keeps 10 tensors for the backward: 1.1 MiB in 7 storages (122 KiB of",
        "  them not parameters)",
        "  attention weights: 2.2 KiB, 2% of what is not parameters",
    ]
    assert all(len(line) <= 80 for line in lines)
