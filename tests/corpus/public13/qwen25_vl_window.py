"""huggingface/transformers, src/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py (v4.51,
``Qwen2_5_VisionTransformerPretrainedModel.get_window_index`` and ``forward``, ``Qwen2_5_VLVisionAttention``):
the vision tower's tokens carry no batch axis (``(seq_len, dim)``, images packed one after another); the tokens
reordered window by window (``hidden_states.reshape(seq_len // unit, unit, -1)[window_index].reshape(seq_len,
-1)``), window layers attending inside ``cu_window_seqlens`` and full layers inside ``cu_seqlens``; attention as
the SDPA path writes it: ``qkv(hidden_states).reshape(seq_length, 3, H, -1).permute(1, 0, 2, 3).unbind(0)``,
``transpose(0, 1)`` to ``(H, seq, d)``, ``lengths = cu_seqlens[1:] - cu_seqlens[:-1]``, ``torch.split`` of q,
k and v by those lengths on the token axis, one ``F.scaled_dot_product_attention`` per window, the windows joined
by ``torch.cat``; after the blocks the order restored by ``reverse_indices = torch.argsort(window_index)``.
Here one 4 x 4 grid of merged patches (``spatial_merge_unit`` 1), windows of 2 x 2.

Bugs (argument): ``restore-forgotten``: the ``hidden_states[reverse_indices, :]`` left out (the tokens leave in
window order: each output row is another patch's feature); ``restore-by-index``: the order "restored" by
``hidden_states[window_index, :]`` (the ``argsort`` forgotten: the permutation applied a second time instead of
undone; for 2 x 2 windows of a 4 x 4 grid it is not its own inverse)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def get_window_index(grid_h, grid_w, window):
    index = torch.arange(grid_h * grid_w).reshape(grid_h, grid_w)                  # (h, w)
    nh, nw = grid_h // window, grid_w // window
    index = index.reshape(nh, window, nw, window).permute(0, 2, 1, 3).reshape(-1)   # window by window
    cu_window_seqlens = torch.arange(0, grid_h * grid_w + 1, window * window)
    return index, cu_window_seqlens


class Qwen2_5_VLVisionAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = heads, bug
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, hidden_states, cu_seqlens):              # (seq, dim)
        seq_length = hidden_states.shape[0]
        q, k, v = self.qkv(hidden_states).reshape(seq_length, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)         # (H, seq, d)
        lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
        splits = [torch.split(t, lengths, dim=1) for t in (q, k, v)]
        attn_outputs = [F.scaled_dot_product_attention(qi[None], ki[None], vi[None])[0]
                        for qi, ki, vi in zip(*splits)]                             # (H, len, d) each
        attn_output = torch.cat(attn_outputs, dim=1)                                # (H, seq, d)
        attn_output = attn_output.transpose(0, 1).reshape(seq_length, -1)          # (seq, dim)
        return self.proj(attn_output)


class Qwen2_5_VisionTransformer(nn.Module):
    def __init__(self, dim, heads, grid, bug="", window=2):
        super().__init__()
        self.grid, self.window, self.bug = grid, window, bug
        self.blocks = nn.ModuleList(Qwen2_5_VLVisionAttention(dim, heads, bug) for _ in range(2))
        self.fullatt_block_indexes = (1,)
        self.norm = nn.LayerNorm(dim)

    def forward(self, hidden_states):                                               # (seq, dim)
        seq_len = hidden_states.shape[0]
        window_index, cu_window_seqlens = get_window_index(self.grid, self.grid, self.window)
        hidden_states = hidden_states.reshape(seq_len, 1, -1)[window_index, :, :].reshape(seq_len, -1)
        cu_seqlens = torch.tensor([0, seq_len])
        for layer_num, blk in enumerate(self.blocks):
            full = layer_num in self.fullatt_block_indexes
            cu_now = cu_seqlens if full else cu_window_seqlens
            hidden_states = hidden_states + blk(self.norm(hidden_states), cu_now)
        if self.bug == "restore-by-index":
            hidden_states = hidden_states[window_index, :]
        elif self.bug != "restore-forgotten":
            reverse_indices = torch.argsort(window_index)
            hidden_states = hidden_states[reverse_indices, :]
        return hidden_states


BUGS = ("restore-forgotten", "restore-by-index")
TWINS = ()
DIMS = ("T=16 D=64 H=4",)
EQUAL = {"T=16 D=64 H=4": "T=16 D=64 H=16"}


def build(bug="", T=16, D=64, H=4):
    torch.manual_seed(0)
    grid = int(T**0.5)
    return Qwen2_5_VisionTransformer(D, H, grid, bug).eval(), (torch.randn(grid * grid, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
