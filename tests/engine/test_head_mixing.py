"""shapetrace/engine/rules/head_mixing.py: the scores' heads summed against a learned matrix over the heads.

x-transformers' talking heads (tests/corpus/public11/talking_heads.py) mix the heads on purpose. On 14a2e35 (branch
r11's first commit) the trace said only "? ... not checked (unnamed axes): #10 einsum ..." without why, and with
the dependency contracts measured (as ``shapetrace trace`` measures them) the correct file was "! 2 warnings"
(``heads-talk``, on the queries and on the keys): now a ``heads-mixed-by-matrix`` note says why the heads after
the einsum have no name, the values' witness folds into it, and the verdict is ``?``."""

from __future__ import annotations

import torch

import shapetrace
from tests.corpus.helpers import findings, traced_build, verdict_line
from tests.corpus.public11 import talking_heads

DIMS = "B=2 T=6 D=64 H=4"


def test_talking_heads_are_a_note_on_the_einsum_that_mixes_them():
    t = traced_build(talking_heads, "", DIMS)
    assert findings(t) == ()
    assert [(d.kind, d.event) for d in t.diagnostics] == [("heads-mixed-by-matrix", 10)]
    assert t.diagnostics[0].message == (
        "einsum #10 sums the heads (H) of the scores [B=2, H=4, T=6, T=6] against the learned matrix [4, 4]: each "
        "head it makes is a weighted sum of every head, on purpose (talking-heads attention), so the heads after it "
        "are new ones that nothing names, and the ops after it are not checked by name.")
    assert verdict_line(t).startswith("? checked 11 of 19 ops that could carry a layout bug; not checked (unnamed "
                                      "axes): #10 einsum, #12 masked_fill")


def test_the_values_witness_folds_into_the_note():
    model, (x,) = talking_heads.build("", B=2, T=6, D=64, H=4)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        t.check_dependencies()
        model(x)
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "heads-mixed-by-matrix")]
    assert t.diagnostics[0].message.endswith(
        "On the values: head 0 of the output depends on heads 0, 1, 2 and 3 of the keys (output heads 1, 2 and 3 "
        "too): heads mix between the split (#3 reshape, #5 reshape, #7 reshape) and the merge (#17 reshape).")
    assert verdict_line(t)[0] == "?"


def test_a_matrix_that_is_no_parameter_is_no_talking_heads():
    model, (x,) = talking_heads.build("", B=2, T=6, D=64, H=4)
    del model.pre_softmax_talking_heads
    model.pre_softmax_talking_heads = torch.eye(4) + 0.1         # (a tensor, not an nn.Parameter)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model(x)
    assert [d.kind for d in t.diagnostics] == []
    assert [a.role for a in t.events[10].inputs[0].axes] == [None, None, "query", "key"]


def test_talking_heads_written_as_a_matmul_over_the_last_axis():
    class MatmulTalk(talking_heads.Attention):
        def forward(self, x):
            q, k, v = (self.to_q(x), self.to_k(x), self.to_v(x))
            q, k, v = (t.view(*t.shape[:2], self.heads, -1).transpose(1, 2) for t in (q, k, v))
            dots = q @ k.transpose(-1, -2) * self.scale                                     # (B, H, T, T)
            dots = (dots.permute(0, 2, 3, 1) @ self.pre_softmax_talking_heads).permute(0, 3, 1, 2)
            out = dots.softmax(dim=-1) @ v                                                  # (B, H, T, d)
            return self.to_out(out.transpose(1, 2).reshape(*x.shape))

    torch.manual_seed(0)
    model, x = MatmulTalk(64, 4).eval(), torch.randn(2, 6, 64)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model(x)
    mixing = [d for d in t.diagnostics if d.kind == "heads-mixed-by-matrix"]
    assert [d.message.split(" sums")[0] for d in mixing] == ["matmul #12"]
