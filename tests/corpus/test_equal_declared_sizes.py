"""Equal declared sizes decide no name, and the note that names rest on them is said only where one did.

Grouped-query attention run at its usual small sizes has ``H_kv = B = 2``. Before, every such run ended
``?`` on correct code with the blanket note ``ambiguous-sizes`` ("names were found from sizes alone, and
equal sizes are ambiguous") although its input ``[B, T, D]`` fits one reading of the declared sizes and
every later name flows from it by provenance, as at distinct sizes. Now the note (and its ``?``) comes
only where a seed chose between two declared names of equal size and no later use settled it: the same
file at B = T = 6 (its input ``[6, 6, 64]`` is ``[B, T, D]`` or ``[T, B, D]``) keeps both; GQA bugs at
B = H_kv stay ``✗``.

Sources: huggingface/transformers ``src/transformers/models/mistral/modeling_mistral.py``
(``MistralAttention.forward``, ``repeat_kv``: ``hidden_states[:, :, None, :, :].expand(batch,
num_key_value_heads, n_rep, slen, head_dim)`` then ``reshape``; eager ``matmul`` of queries and keys,
``attn_output.transpose(1, 2).contiguous()`` before ``reshape``) and
``src/transformers/models/qwen2/modeling_qwen2.py`` (the same ``repeat_kv``, attention by
``F.scaled_dot_product_attention`` in its sdpa path).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace

GQA = "B=2 T=6 D=64 H=4 H_kv=2"      # B = H_kv = 2 = n_rep: the sizes these models are tried at
B_IS_T = "B=6 T=6 D=64 H=4 H_kv=2"   # B = T = 6: the input [6, 6, 64] fits [B, T, D] and [T, B, D]
NOTE = "names were found from sizes alone, and equal sizes are ambiguous"


def repeat_kv(hidden, n_rep, tiled=False):
    """transformers' ``repeat_kv``: each key/value head repeated ``n_rep`` times next to itself.
    ``tiled``: the bug of ``hidden.repeat(1, n_rep, 1, 1)``, the heads tiled (kv 0, 1, 0, 1), so query
    head 1 reads kv head 1 where its group is kv head 0."""
    b, h_kv, t, d = hidden.shape
    if tiled:
        return hidden.repeat(1, n_rep, 1, 1)                                # (B, n_rep·H_kv, T, d_k)
    hidden = hidden[:, :, None, :, :].expand(b, h_kv, n_rep, t, d)          # (B, H_kv, n_rep, T, d_k)
    return hidden.reshape(b, h_kv * n_rep, t, d)                            # (B, H, T, d_k)


class GroupedAttention(nn.Module):
    """Mistral's eager attention (``sdpa=False``) or Qwen2's sdpa path (``sdpa=True``), without rotary.
    ``bug``: ``"tiled"`` (repeat_kv tiles the heads) or ``"merge"`` (heads merged without the transpose)."""

    def __init__(self, d=64, h=4, h_kv=2, sdpa=False, bug=None):
        super().__init__()
        self.h, self.h_kv, self.hd, self.sdpa, self.bug = h, h_kv, d // h, sdpa, bug
        self.q_proj = nn.Linear(d, h * self.hd)
        self.k_proj = nn.Linear(d, h_kv * self.hd)
        self.v_proj = nn.Linear(d, h_kv * self.hd)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)

    def forward(self, x):
        bsz, q_len, _ = x.size()                                                    # (B, T, D)
        q = self.q_proj(x).view(bsz, q_len, self.h, self.hd).transpose(1, 2)       # (B, H, T, d_k)
        k = self.k_proj(x).view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)    # (B, H_kv, T, d_k)
        v = self.v_proj(x).view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)    # (B, H_kv, T, d_k)
        k = repeat_kv(k, self.h // self.h_kv, tiled=self.bug == "tiled")           # (B, H, T, d_k)
        v = repeat_kv(v, self.h // self.h_kv, tiled=self.bug == "tiled")           # (B, H, T, d_k)
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # (B, H, T, d_k)
        else:
            w = torch.matmul(q, k.transpose(2, 3)) / self.hd ** 0.5                 # (B, H, T, T)
            mask = torch.full((q_len, q_len), float("-inf")).triu(1)               # (T, T)
            w = F.softmax(w + mask[None, None], dim=-1)                            # (B, H, T, T)
            out = torch.matmul(w, v)                                               # (B, H, T, d_k)
        if self.bug != "merge":
            out = out.transpose(1, 2).contiguous()                                 # (B, T, H, d_k)
        return self.o_proj(out.reshape(bsz, q_len, -1))                            # (B, T, D)


def _traced(dims: str, batch: int, **kwargs):
    torch.manual_seed(0)
    model = GroupedAttention(**kwargs)
    x = torch.randn(batch, 6, 64)                                                  # (B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    return t


def _kinds(t) -> list[str]:
    return [d.kind for d in t.diagnostics]


@pytest.mark.parametrize("sdpa", [False, True], ids=["mistral-eager", "qwen2-sdpa"])
def test_gqa_at_batch_equal_to_kv_heads_is_proven(sdpa):
    """The correct file at B = H_kv = 2: no name chose between B and H_kv (the input fits ``[B, T, D]``
    alone), so no note and a ``✓`` (main: ``?`` with the note ``B = H_kv = 2``)."""
    t = _traced(GQA, 2, sdpa=sdpa)
    assert _kinds(t) == []
    repeated = [e for e in t.events if e.op == "reshape"][0]
    assert repeated.outputs[0].dims == ("B", "H", "T", "d_k")
    assert [e.outputs[0].dims for e in t.events if e.op == "transpose"][:3] == [
        ("B", "H", "T", "d_k"), ("B", "H_kv", "T", "d_k"), ("B", "H_kv", "T", "d_k")]
    v = t.report().verdict
    assert (v.mark, v.unproven, v.errors, v.warnings) == ("✓", (), 0, 0)


@pytest.mark.parametrize("sdpa", [False, True], ids=["mistral-eager", "qwen2-sdpa"])
def test_an_input_read_either_way_at_equal_sizes_keeps_the_note(sdpa):
    """The twin: the same correct file at B = T = 6. Its input ``[6, 6, 64]`` fits ``[B, T, D]`` and
    ``[T, B, D]``, and nothing later settles which: its names rest on that choice, so the note and ``?``."""
    t = _traced(B_IS_T, 6, sdpa=sdpa)
    assert [(d.severity, d.kind, d.message) for d in t.diagnostics] == [
        ("note", "ambiguous-sizes", "B = T = 6: names found from sizes alone are ambiguous.")]
    v = t.report().verdict
    assert v.mark == "?" and v.unproven == (NOTE,) and v.errors == 0


@pytest.mark.parametrize("sdpa", [False, True], ids=["mistral-eager", "qwen2-sdpa"])
def test_heads_merged_without_the_transpose_at_batch_equal_to_kv_heads(sdpa):
    """``out.reshape(bsz, q_len, -1)`` of ``[B, H, T, d_k]`` (the transpose left out): tokens merged with
    heads, the same one error at B = H_kv = 2 as at B = 3, and no note."""
    t = _traced(GQA, 2, sdpa=sdpa, bug="merge")
    merged = [e for e in t.events if e.op == "reshape"][-1]
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "mixed-axis", merged.index)]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("sdpa", [False, True], ids=["mistral-eager", "qwen2-sdpa"])
def test_key_heads_tiled_at_batch_equal_to_kv_heads(sdpa):
    """``repeat_kv`` by ``repeat(1, n_rep, 1, 1)``: query head 1 meets kv head 1, not its group's 0.
    The same one error at B = H_kv = 2 as at B = 3, on the keys' repeat, and no note."""
    t = _traced(GQA, 2, sdpa=sdpa, bug="tiled")
    tiled = [e for e in t.events if e.op == "repeat"][0]
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics] == [("error", "gqa-head-order", tiled.index)]
    assert t.report().verdict.mark == "✗"


def test_a_size_argument_that_the_elements_contradict_keeps_the_note():
    """fairseq's ``attn_weights.view(bsz, num_heads, tgt_len, src_len)`` written heads first
    (``view(num_heads, bsz, …)`` of its batch-major fold ``[B·H, T, S]``, tests/corpus/public7/fairseq_mha.py):
    it runs only at B = H, where ``bsz`` (read from the input's batch axis) lands on the axis whose
    elements are heads. Which name holds was chosen between B and H of equal size: the note and ``?``
    (with the note keyed on seeds alone it was ``✓`` on this bug); the correct file there is ``✓``."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.public7 import fairseq_mha

    t = traced_build(fairseq_mha, "scores-heads-first", "B=4 T=6 D=32 H=4")
    assert [(d.severity, d.kind, d.message) for d in t.diagnostics] == [
        ("note", "ambiguous-sizes", "B = H = 4: names found from sizes alone are ambiguous.")]
    assert t.report().verdict.mark == "?"
    correct = traced_build(fairseq_mha, "", "B=4 T=6 D=32 H=4")
    assert correct.diagnostics == [] and correct.report().verdict.mark == "✓"
