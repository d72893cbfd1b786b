"""Rotary tables that pair features as their rotation does, and tables laid out for the other pairing
(issue 33 item 4): halves (``rotate_half``: feature i with i + d/2) against interleaved
(``rotate_every_two``: 2k with 2k + 1).

Each bug is a table built one way and applied with the rotation of the other, which runs without an
error at any size and trains to a worse model; its correct twin must stay silent. Every case runs at
distinct sizes and at B = T = H = 4 (equal sizes decide nothing: the pairing is read from element
provenance and the table's values, never from sizes).
"""

from __future__ import annotations

import torch
from einops import rearrange, repeat
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"             # d_k = 8
SQUARE = "B=4 T=4 D=32 H=4"           # B = T = H = 4, d_k = 8


def inv_freq(dim: int) -> torch.Tensor:
    """The frequencies every form below shares (transformers' ``LlamaRotaryEmbedding.inv_freq``)."""
    return 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))          # (d_k/2,)


def rotate_half(x):
    """huggingface/transformers ``modeling_llama.rotate_half`` (and GPT-NeoX's): halves."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)                                     # (..., d_k) [halves-rot]


def rotate_every_two(x):
    """huggingface/transformers ``modeling_gptj.rotate_every_two``: interleaved."""
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)                                      # (..., d_k/2, 2)
    return x.flatten(-2)                                                    # (..., d_k) [pairs-rot]


def rotate_half_lucidrains(x):
    """lucidrains/rotary-embedding-torch ``rotate_half``: interleaved, with einops."""
    x = rearrange(x, "... (d r) -> ... d r", r=2)                           # (..., d_k/2, 2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)                                      # (..., d_k/2, 2)
    return rearrange(x, "... d r -> ... (d r)")                             # (..., d_k) [luci-rot]


def rotate_half_flash(x, interleaved: bool):
    """Dao-AILab/flash-attention ``layers/rotary.py`` reference ``rotate_half(x, interleaved)``."""
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)                                 # (..., d_k) [flash-rot]
    x1, x2 = x[..., ::2], x[..., 1::2]
    return rearrange(torch.stack((-x2, x1), dim=-1), "... d two -> ... (d two)", two=2)  # [flash-rot]


class RotaryAttention(nn.Module):
    """Multi-head attention with rotary q and k on (B, H, T, d_k), the table broadcast over the heads
    (transformers' ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``)."""

    def __init__(self, dim: int, heads: int, table, rotate):
        super().__init__()
        self.heads, self.table, self.rotate = heads, table, rotate
        self.qkv, self.out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.register_buffer("inv_freq", inv_freq(dim // heads), persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q, k, v = self.qkv(x).split(D, dim=-1)                              # (B, T, D) x 3
        q = q.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        k = k.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        v = v.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        freqs = torch.outer(torch.arange(T, device=x.device).float(), self.inv_freq)  # (T, d_k/2)
        cos, sin = self.table(freqs)                                        # (T, d_k) x 2
        q = q * cos + self.rotate(q) * sin                                  # (B, H, T, d_k)
        k = k * cos + self.rotate(k) * sin                                  # (B, H, T, d_k)
        scores = q @ k.transpose(-2, -1) / d ** 0.5                         # (B, H, T, T)
        y = scores.softmax(dim=-1) @ v                                      # (B, H, T, d_k)
        return self.out(y.transpose(1, 2).reshape(B, T, D))                 # (B, T, D)


def halves_table(freqs):
    """transformers' ``LlamaRotaryEmbedding.forward``: ``emb = torch.cat((freqs, freqs), dim=-1)``."""
    emb = torch.cat((freqs, freqs), dim=-1)                                 # (T, d_k) [halves-table]
    return emb.cos(), emb.sin()


def interleaved_table(freqs):
    """GPT-J's ``duplicate_interleave`` / ``torch.repeat_interleave(sin, 2, 3)``: interleaved."""
    emb = freqs.repeat_interleave(2, dim=-1)                                # (T, d_k) [pairs-table]
    return emb.cos(), emb.sin()


def stacked_table(freqs):
    """``torch.stack([f, f], -1).flatten(-2)``: interleaved, written as a stack."""
    emb = torch.stack([freqs, freqs], dim=-1).flatten(-2)                   # (T, d_k)
    return emb.cos(), emb.sin()


def lucidrains_table(freqs):
    """lucidrains/rotary-embedding-torch ``RotaryEmbedding.forward``: ``repeat(freqs, '... n -> ... (n r)', r=2)``."""
    emb = repeat(freqs, "... n -> ... (n r)", r=2)                          # (T, d_k)
    return emb.cos(), emb.sin()


def flash_table(interleaved: bool):
    """flash-attention's ``apply_rotary_emb_torch``: ``repeat(cos, '... d -> ... 1 (2 d)')`` (halves) or
    ``'... d -> ... 1 (d 2)'`` (interleaved)."""
    pattern = "... d -> ... (d 2)" if interleaved else "... d -> ... (2 d)"

    def table(freqs):
        return repeat(freqs.cos(), pattern), repeat(freqs.sin(), pattern)   # (T, d_k) x 2
    return table


def flash_rotate(interleaved: bool):
    return lambda x: rotate_half_flash(x, interleaved)


def model(table, rotate):
    def sized(B: int, T: int, D: int, H: int):
        def make():
            return RotaryAttention(D, H, table, rotate).eval(), (torch.randn(B, T, D),)
        return make
    return sized


def cases(name: str, table, rotate, bug: tuple[str, ...] = ()) -> list[Case]:
    """The same model at distinct sizes and at B = T = H = 4."""
    build = model(table, rotate)
    return [Case(name, DIMS, build(2, 5, 24, 3), bug=bug),
            Case(f"{name}-B-T-H-4", SQUARE, build(4, 4, 32, 4), bug=bug)]


CASES = [
    # -- correct: each table laid out as its rotation pairs features ---------------------------------------
    # transformers' Llama / GPT-NeoX: cat((freqs, freqs)) with rotate_half
    *cases("llama-halves-table-rotate-half", halves_table, rotate_half),
    # GPT-J: a repeat_interleave(2) table with rotate_every_two
    *cases("gptj-interleaved-table-rotate-every-two", interleaved_table, rotate_every_two),
    # the same interleaved table written as stack([f, f], -1).flatten(-2)
    *cases("stacked-table-rotate-every-two", stacked_table, rotate_every_two),
    # lucidrains/rotary-embedding-torch: repeat '(n r)' with its interleaved rotate_half
    *cases("lucidrains-interleaved", lucidrains_table, rotate_half_lucidrains),
    # flash-attention's reference, both flags agreeing
    *cases("flash-reference-halves", flash_table(False), flash_rotate(False)),
    *cases("flash-reference-interleaved", flash_table(True), flash_rotate(True)),
    # -- bugs: a table laid out for the other pairing --------------------------------------------------------
    # an interleaved table (GPT-J's repeat_interleave) under transformers' rotate_half
    *cases("interleaved-table-under-rotate-half", interleaved_table, rotate_half, bug=("halves-rot",)),
    # a stack([f, f], -1).flatten(-2) table under rotate_half
    *cases("stacked-table-under-rotate-half", stacked_table, rotate_half, bug=("halves-rot",)),
    # Llama's cat((freqs, freqs)) table under GPT-J's rotate_every_two
    *cases("halves-table-under-rotate-every-two", halves_table, rotate_every_two, bug=("pairs-rot",)),
    # lucidrains' interleaved table under a halves rotate_half
    *cases("lucidrains-table-under-rotate-half", lucidrains_table, rotate_half, bug=("halves-rot",)),
    # Llama's table under lucidrains' interleaved rotate_half
    *cases("halves-table-under-lucidrains-rotation", halves_table, rotate_half_lucidrains, bug=("luci-rot",)),
    # flash-attention's reference with the table's and the rotation's `interleaved` flags disagreeing
    *cases("flash-halves-table-interleaved-rotation", flash_table(False), flash_rotate(True), bug=("flash-rot",)),
    *cases("flash-interleaved-table-halves-rotation", flash_table(True), flash_rotate(False), bug=("flash-rot",)),
]

test_names, test_verdict = corpus_tests(__name__, CASES)
