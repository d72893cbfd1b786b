"""engine/infer/module_heads.py: heads written as sibling modules of one ``nn.ModuleList`` (Karpathy's ``Head``,
rasbt's ``CausalAttention``), each ``softmax(q @ kᵀ) @ v`` of its own projections of one input, joined, are named
from that structure: each projection's width ``d_k``, a ``cat`` on the features ``H·d_k``. Every test here fails
on eefe532 (the branch point), where each projection's ``[B, T, 8]`` stayed unnamed: each pairs the structure that
names with a variant that must not, so the variant alone cannot pass by naming nothing."""

import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.helpers import verdict_line

DIMS = "B=2 T=6 D=32 H=4"


class Head(nn.Module):
    def __init__(self, d, width):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(d, width, bias=False) for _ in range(3))

    def forward(self, x):
        k, q = self.key(x), self.query(x)                                     # (B, T, hs)
        wei = F.softmax(q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5, dim=-1)  # (B, T, T)
        return wei @ self.value(x)                                            # (B, T, hs)


class OtherHead(Head):
    """The same code under another class: a list of two classes is no set of copies of one head."""


class Heads(nn.Module):
    def __init__(self, d=32, count=4, width=8, kinds=(Head,), reuse=False, dim=-1):
        super().__init__()
        self.heads = nn.ModuleList([kinds[i % len(kinds)](d, width) for i in range(count)])
        self.reuse, self.dim = reuse, dim

    def forward(self, x):
        if self.reuse:   # one head's output standing for every head
            return torch.cat([self.heads[0](x)] * len(self.heads), dim=self.dim)
        return torch.cat([h(x) for h in self.heads], dim=self.dim)


def _traced(model, dims=DIMS, shape=(2, 6, 32)):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model.eval()(torch.randn(*shape))
    linears = [e.outputs[0].dims for e in t.events if e.op == "linear"]
    cat = next(e for e in t.events if e.op == "cat")
    return linears, cat.outputs[0].dims, verdict_line(t)


def test_sibling_heads_cat_on_the_features_are_d_k_each_and_h_times_d_k_joined():
    """On eefe532: ``? checked`` some of 29 with every projection ``[B, T, 8]`` unnamed and the cat ``[B, T, 32]``."""
    linears, cat, line = _traced(Heads())
    assert linears == [("B", "T", "d_k")] * 12
    assert cat == ("B", "T", "D")   # (H·d_k, heads-major: the namer reads H, d_k as D = H·d_k)
    assert line.startswith("✓ checked all 29 ops")


def test_one_heads_output_reused_for_every_part_names_nothing():
    """Four parts that are one module's one output are no four heads; the sibling heads name (fails on eefe532)."""
    reused, _, line = _traced(Heads(reuse=True))
    assert reused == [("B", "T", None)] * 3 and line.startswith("? checked")
    assert _traced(Heads())[0][0] == ("B", "T", "d_k")


def test_heads_of_two_classes_or_joined_along_the_tokens_name_nothing():
    """A list mixing two classes (same code), or a cat of the heads along the tokens (``dim=1``, the bug) is not
    the structure; the same heads of one class on the features are (fails on eefe532)."""
    mixed = _traced(Heads(kinds=(Head, OtherHead)))
    tokens = _traced(Heads(dim=1))
    assert mixed[0] == [("B", "T", None)] * 12 and mixed[2].startswith("? checked")
    assert tokens[0] == [("B", "T", None)] * 12 and tokens[1] == ("B", "T+T+T+T", None) and tokens[2].startswith("?")
    assert _traced(Heads())[1] == ("B", "T", "D")


def test_a_head_count_other_than_the_declared_h_names_nothing():
    """Two heads of 16 under ``H=4`` (d_k = 8): the count and the width disagree with the declared heads, so
    neither is named; under ``H=2`` (d_k = 16) the same model is named (fails on eefe532)."""
    wrong, _, line = _traced(Heads(count=2, width=16))
    assert wrong == [("B", "T", None)] * 6 and line.startswith("? checked")
    right, cat, line = _traced(Heads(count=2, width=16), dims="B=2 T=6 D=32 H=2")
    assert right == [("B", "T", "d_k")] * 6 and cat == ("B", "T", "D") and line.startswith("✓")


def test_heads_projecting_with_parameters_of_their_own_are_named_too():
    """rasbt's blog heads (tests/corpus/modheads/rasbt_blog_self_attention): ``x @ self.W_query`` of an
    ``nn.Parameter(torch.rand(d_in, d_out))`` is a projection as ``nn.Linear`` is; on eefe532 ``? checked 8 of
    29`` with every ``[T, 8]`` unnamed. Its ``one-head-for-all`` bug (one head's output joined four times) names
    nothing."""
    from tests.corpus.modheads import rasbt_blog_self_attention as module

    found = {}
    for bug in ("", "one-head-for-all"):
        model, inputs = module.build(bug)
        with torch.no_grad(), shapetrace.trace(dims=module.DIMS[0]) as t:
            model(*inputs)
        products = [e.outputs[0].dims for e in t.events if e.op == "matmul"]
        cat = next(e for e in t.events if e.op == "cat").outputs[0].dims
        found[bug] = products[:3], cat, verdict_line(t)[:20]
    assert found[""] == ([("T", "d_k")] * 3, ("T", "D"), "✓ checked all 29 ops")
    assert found["one-head-for-all"] == ([("T", None)] * 3, ("T", None), "? checked 2 of 8 ops")
