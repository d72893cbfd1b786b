"""jadore801120/attention-is-all-you-need-pytorch PR #17 ("Correct LayerNormalization", merged): the
repository's own ``LayerNormalization`` took ``mu = torch.mean(z, dim=1)`` and ``sigma = torch.std(z, dim=1)``
of ``z`` shaped ``(batch_size, seq_len, feature_dim)`` (PyTorch 0.1 kept the reduced axis), so each feature was
normalised across the positions of its sentence rather than each position across its features, as the layer
normalisation paper and ``nn.LayerNorm`` do. The fix reduces over the last axis.

The idiom: the repository's ``ScaledDotProductAttention`` and ``MultiHeadAttention`` (``view(B, T, H, d)``,
``permute(2, 0, 1, 3).contiguous().view(-1, T, d)`` head-major, ``bmm``, a softmax over the keys), the
residual ``output + residual`` and the hand-written ``LayerNormalization`` with ``a_2``, ``b_2`` gains.

Bug (argument): ``stats-over-positions``: ``mean`` and ``std`` over ``dim=1`` (kept)."""

import sys

import torch
from torch import nn

BUGS = ("stats-over-positions",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class LayerNormalization(nn.Module):
    def __init__(self, d_hid, eps=1e-3, bug=""):
        super().__init__()
        self.eps, self.bug = eps, bug
        self.a_2, self.b_2 = nn.Parameter(torch.ones(d_hid)), nn.Parameter(torch.zeros(d_hid))

    def forward(self, z):                                                               # (B, T, D)
        dim = 1 if self.bug == "stats-over-positions" else -1
        mu = torch.mean(z, dim=dim, keepdim=True)
        sigma = torch.std(z, dim=dim, keepdim=True)
        ln_out = (z - mu.expand_as(z)) / (sigma.expand_as(z) + self.eps)
        return ln_out * self.a_2.expand_as(ln_out) + self.b_2.expand_as(ln_out)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, bug=""):
        super().__init__()
        self.n_head, self.d_k = n_head, d_model // n_head
        self.w_qs, self.w_ks, self.w_vs = (nn.Linear(d_model, d_model) for _ in range(3))
        self.proj = nn.Linear(d_model, d_model)
        self.layer_norm = LayerNormalization(d_model, bug=bug)

    def forward(self, q, k, v):
        residual = q
        b, t, _ = q.size()
        n, d = self.n_head, self.d_k
        q_s = self.w_qs(q).view(b, t, n, d).permute(2, 0, 1, 3).contiguous().view(-1, t, d)   # (H·B, T, d)
        k_s = self.w_ks(k).view(b, t, n, d).permute(2, 0, 1, 3).contiguous().view(-1, t, d)
        v_s = self.w_vs(v).view(b, t, n, d).permute(2, 0, 1, 3).contiguous().view(-1, t, d)
        attn = torch.bmm(q_s, k_s.transpose(1, 2)) / d ** 0.5                           # (H·B, T, T)
        outputs = torch.bmm(attn.softmax(dim=-1), v_s)                                  # (H·B, T, d)
        outputs = outputs.view(n, b, t, d).permute(1, 2, 0, 3).contiguous().view(b, t, -1)   # (B, T, D)
        return self.layer_norm(self.proj(outputs) + residual)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, bug)

    def forward(self, enc_input):
        return self.slf_attn(enc_input, enc_input, enc_input)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return EncoderLayer(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
