"""A table indexed by a constant buffer whose shape happens to fit the declared sizes (issue 33: equal
sizes never decide a name). At B = T = 4 a window's ``[T, T]`` relative-position index enters the
traced code as ``[B, T]`` or ``[T, B]``, a guess by size alone; the pick ``table[index]`` must not take
those names (element provenance hands an index's names on only when they are proven:
``shapetrace.engine.infer.guesses``). Before, Swin's bias came out ``[1, H, B, T]`` and its addition
to the scores was a false ``✗ broadcast-mismatch``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class WindowBias(nn.Module):
    """microsoft/Swin-Transformer ``WindowAttention`` (timm's ``swin_transformer.py`` the same): a
    learned ``[(2W-1)², H]`` table indexed by the registered ``relative_position_index`` of the window's
    ``[N, N]`` token pairs, ``permute(2, 0, 1)`` to ``[H, N, N]`` and added to the scores. ``flat``:
    indexed through ``view(-1)`` as Swin does, else with the 2-D index directly."""

    def __init__(self, dim: int, heads: int, window: int, flat: bool):
        super().__init__()
        self.heads, self.flat = heads, flat
        self.table = nn.Parameter(torch.randn((2 * window - 1), heads))
        pos = torch.arange(window)
        self.register_buffer("relative_position_index", pos[:, None] - pos[None, :] + window - 1)  # (N, N)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, N, d_k)
        attn = q @ k.transpose(-2, -1) / (C // self.heads) ** 0.5  # (B, H, N, N)
        if self.flat:
            bias = self.table[self.relative_position_index.view(-1)].view(N, N, -1)  # (N, N, H)
        else:
            bias = self.table[self.relative_position_index]  # (N, N, H)
        attn = attn + bias.permute(2, 0, 1).unsqueeze(0)  # (B, H, N, N)
        return (attn.softmax(-1) @ v).transpose(1, 2).reshape(B, N, C)  # (B, N, C)


@pytest.mark.parametrize("flat", [True, False], ids=["view(-1)", "2-d index"])
@pytest.mark.parametrize("dims", ["B=4 T=4 D=32 H=4", "B=2 T=4 D=32 H=4", "B=4 T=4 D=16 H=2"])
def test_a_constant_index_named_by_size_hands_no_name_to_what_it_picks(flat, dims):
    sizes = dict(kv.split("=") for kv in dims.split())
    torch.manual_seed(0)
    model = WindowBias(int(sizes["D"]), int(sizes["H"]), int(sizes["T"]), flat).eval()
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(torch.randn(int(sizes["B"]), int(sizes["T"]), int(sizes["D"])))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    picked = [e.outputs[0].dims for e in t.events if e.op == "__getitem__" and "table[" in e.code]
    # no name rather than a guess; the table's last axis meets the scores' heads, and is named so where no
    # other axis of the scores has H entries (through the 2-d index: the flat index's view is not walked back)
    heads = "H" if sizes["H"] not in (sizes["B"], sizes["T"]) else None
    assert picked == [(None, None) if flat else (None, None, heads)]


# -- a lookup (``nn.Embedding``) reads its index as a pick does -----------------------------------------

class T5BucketBias(nn.Module):
    """huggingface/transformers ``T5Attention.compute_bias`` (modeling_t5.py; tests/styles/t5.py): the
    bucketed relative distances ``[T_q, T_k]`` looked up in ``relative_attention_bias = nn.Embedding(
    num_buckets, n_heads)``, ``permute([2, 0, 1]).unsqueeze(0)`` to ``[1, H, T_q, T_k]`` and added to the
    scores (no 1/√d_k). The buckets are computed once in ``__init__`` and registered, as Swin registers
    its ``relative_position_index``. ``memory``: a decoder layer that then attends to an encoder's states
    (``T5LayerCrossAttention``, no position bias), for decoder and encoder lengths that are equal."""

    def __init__(self, dim: int, heads: int, length: int, memory: bool = False, buckets: int = 8):
        super().__init__()
        self.heads, self.memory = heads, memory
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.relative_attention_bias = nn.Embedding(buckets, heads)
        pos = torch.arange(length)
        half = buckets // 2
        self.register_buffer("buckets", (pos[None, :] - pos[:, None]).clamp(-half + 1, half - 1) + half - 1)

    def attend(self, x, states, bias):
        B, T, C = x.shape
        q = self.q(x).view(B, -1, self.heads, C // self.heads).transpose(1, 2)  # (B, H, T, d_k)
        k = self.k(states).view(B, -1, self.heads, C // self.heads).transpose(1, 2)  # (B, H, S, d_k)
        v = self.v(states).view(B, -1, self.heads, C // self.heads).transpose(1, 2)  # (B, H, S, d_k)
        scores = torch.matmul(q, k.transpose(3, 2))  # (B, H, T, S)
        if bias is not None:
            scores = scores + bias  # (B, H, T, T)
        y = torch.matmul(scores.softmax(-1), v)  # (B, H, T, d_k)
        return self.o(y.transpose(1, 2).contiguous().view(B, -1, C))  # (B, T, D)

    def forward(self, x, encoder_states=None):
        bias = self.relative_attention_bias(self.buckets)  # (T, T, H)
        x = self.attend(x, x, bias.permute([2, 0, 1]).unsqueeze(0))  # (B, T, D)
        return self.attend(x, encoder_states, None) if self.memory else x


def _t5_traced(dims: str, memory: bool):
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    torch.manual_seed(0)
    model = T5BucketBias(sizes["D"], sizes["H"], sizes["T"], memory).eval()
    inputs = [torch.randn(sizes["B"], sizes["T"], sizes["D"])]
    if memory:
        inputs.append(torch.randn(sizes["B"], sizes["S"], sizes["D"]))
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(*inputs)
    return t


@pytest.mark.parametrize("dims,memory,want", [
    ("B=4 T=4 D=32 H=4", False, (None, None, None)),
    ("B=4 T=4 S=4 D=32 H=4", True, (None, None, None)),
    ("B=2 T=6 D=32 H=4", False, (None, None, "H")),
    ("B=2 T=6 S=5 D=32 H=4", True, (None, None, "H")),
], ids=["B=T=H=4", "B=T=S=H=4 cross", "B=2,T=6", "B=2,T=6,S=5 cross"])
def test_a_registered_bucket_table_named_by_size_hands_no_name_to_its_lookup(dims, memory, want):
    """At B = T = H = 4 the registered ``[T, T]`` buckets fit ``[B, T]`` by size alone; the lookup
    handed that guess on (``[B, T, H]``, permuted ``[1, H, B, T]``) and the bias met the scores as a
    false ``✗ broadcast-mismatch`` (B against T). The lookup now refuses a guessed index's names as a
    pick does: the correct file gets no error, and ``?``, since the bias is not named."""
    t = _t5_traced(dims, memory)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert [e.outputs[0].dims for e in t.events if e.op == "embedding"] == [want]
    assert t.report().verdict.line[0] == "?"


class TokenIds(nn.Module):
    """karpathy/nanoGPT ``GPT.forward``: ``tok_emb = self.transformer.wte(idx)`` of the token ids
    ``[B, T]``, plus ``wpe(torch.arange(0, t))``. The ids are the traced code's input, which the declared
    sizes describe in their order: at B = T they keep ``[B, T]`` (flagged ambiguous, never proven), as a
    float input ``[B, T, D]`` does. ``pick``: the table read as ``wte.weight[idx]``, the same lookup."""

    def __init__(self, pick: bool):
        super().__init__()
        self.pick = pick
        self.wte, self.wpe = nn.Embedding(16, 32), nn.Embedding(8, 32)

    def forward(self, idx):
        b, t = idx.size()
        tok = self.wte.weight[idx] if self.pick else self.wte(idx)  # (B, T, D)
        return tok + self.wpe(torch.arange(0, t))  # (B, T, D)


@pytest.mark.parametrize("pick", [False, True], ids=["wte(idx)", "wte.weight[idx]"])
@pytest.mark.parametrize("batch", [4, 2], ids=["B=T=4", "B=2,T=4"])
def test_token_ids_the_code_is_given_keep_their_names_through_the_lookup(pick, batch):
    with torch.no_grad(), shapetrace.trace(dims=f"B={batch} T=4 D=32 H=4") as t:
        TokenIds(pick).eval()(torch.randint(0, 16, (batch, 4)))
    looked = [e.outputs[0].dims for e in t.events if e.op in ("embedding", "__getitem__")]
    # (a pick's table columns: unnamed on bebe57e; the position embedding it is added to lines them up with its
    # D, infer/lined_up)
    assert looked == [("B", "T", "D"), ("T", "D")]
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
