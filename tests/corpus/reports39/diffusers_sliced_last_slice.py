"""huggingface/diffusers issue #8837 ("bug of SlicedAttnProcessor"; the fix in pull request #8836):
``SlicedAttnProcessor`` loops ``for i in range(batch_size_attention // self.slice_size)``, so when the ``B * H``
rows of the heads-folded batch are not a multiple of ``slice_size`` the last, partial slice is never computed and
its rows of the ``torch.zeros`` output buffer stay zero (the reporter: the same prompt gives different results
alone and doubled in a batch). The fix loops ``(batch_size_attention - 1) // self.slice_size + 1`` times.

The idiom (diffusers' ``Attention`` with ``SlicedAttnProcessor``, ported to a hand-written torch module):
``to_q``/``to_k``/``to_v``, ``head_to_batch_dim`` (``reshape(b, n, h, d).permute(0, 2, 1, 3).reshape(b * h, n,
d)``), an output buffer ``torch.zeros(B * H, T, d)``, per slice ``get_attention_scores`` (``torch.baddbmm`` over an
empty bias with ``beta=0, alpha=scale``, softmax) and ``torch.bmm`` with the values written into the buffer,
``batch_to_head_dim`` and ``to_out``; a pre-norm residual block. ``slice_size=3`` does not divide ``B * H``.

Bug (argument): ``last-slice``: the loop runs ``batch_size_attention // slice_size`` times."""

import sys

import torch
from torch import nn

BUGS = ("last-slice",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class SlicedAttention(nn.Module):
    def __init__(self, dim, heads, slice_size=3, bug=""):
        super().__init__()
        self.heads, self.slice_size, self.bug = heads, slice_size, bug
        self.scale = (dim // heads) ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def head_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)    # (B, T, H, d)
        tensor = tensor.permute(0, 2, 1, 3)                                              # (B, H, T, d)
        return tensor.reshape(batch_size * self.heads, seq_len, dim // self.heads)      # (B*H, T, d)

    def batch_to_head_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size // self.heads, self.heads, seq_len, dim)     # (B, H, T, d)
        tensor = tensor.permute(0, 2, 1, 3)                                              # (B, T, H, d)
        return tensor.reshape(batch_size // self.heads, seq_len, dim * self.heads)      # (B, T, D)

    def get_attention_scores(self, query, key):
        baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype)
        scores = torch.baddbmm(baddbmm_input, query, key.transpose(-1, -2), beta=0, alpha=self.scale)
        return scores.softmax(dim=-1)                                                    # (slice, T, T)

    def forward(self, hidden_states):
        query = self.head_to_batch_dim(self.to_q(hidden_states))                        # (B*H, T, d)
        key = self.head_to_batch_dim(self.to_k(hidden_states))                          # (B*H, T, d)
        value = self.head_to_batch_dim(self.to_v(hidden_states))                        # (B*H, T, d)
        batch_size_attention, query_tokens, _ = query.shape
        out = torch.zeros((batch_size_attention, query_tokens, query.shape[-1]), dtype=query.dtype)
        if self.bug == "last-slice":
            n_slices = batch_size_attention // self.slice_size
        else:
            n_slices = (batch_size_attention - 1) // self.slice_size + 1
        for i in range(n_slices):
            start_idx, end_idx = i * self.slice_size, (i + 1) * self.slice_size
            attn_slice = self.get_attention_scores(query[start_idx:end_idx], key[start_idx:end_idx])
            out[start_idx:end_idx] = torch.bmm(attn_slice, value[start_idx:end_idx])
        return self.to_out(self.batch_to_head_dim(out))                                  # (B, T, D)


class Block(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = SlicedAttention(dim, heads, bug=bug)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn1(self.norm1(x))
        return x + self.ff(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
