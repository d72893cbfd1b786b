"""yuqinie98/PatchTST, ``PatchTST_supervised/layers/PatchTST_backbone.py`` (2023, ``PatchTST_backbone``,
``TSTiEncoder``, ``_MultiheadAttention``, ``_ScaledDotProductAttention``): each series (channel) cut into patches
with ``x.unfold(dimension=-1, size=patch_len, step=stride)`` -> ``[bs x nvars x patch_num x patch_len]``, a
``W_P`` Linear to ``d_model``, channel independence ``torch.reshape(u, (bs * nvars, patch_num, d_model))``;
the attention ``W_Q(Q).view(bs, -1, n_heads, d_k).transpose(1, 2)``, keys already transposed
``W_K(K).view(bs, -1, n_heads, d_k).permute(0, 2, 3, 1)``, ``attn_scores = torch.matmul(q, k) * scale`` plus the
previous layer's scores (``res_attention``), ``softmax(dim=-1)``, ``output.transpose(1, 2).contiguous().view(bs,
-1, n_heads * d_v)``, ``to_out``; back to ``[bs x nvars x d_model x patch_num]`` for the flatten head.

Bugs: ``channels-merged-without-permute``: the patches' embedding ``[bs x nvars x patch_num x d_model]`` reached
from ``[bs x nvars x d_model x patch_num]`` (the backbone's own layout, which permutes ``(0, 1, 3, 2)`` first)
by a ``reshape`` alone (patches and features interleave; the slip of ports that drop the permute);
``res-scores-transposed``: the previous layer's scores added as ``prev.transpose(-2, -1)`` (the residual
attention stored in the keys-first layout of ``k``)."""

import sys

import torch
from torch import nn


class MultiheadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.d_k, self.bug = n_heads, d_model // n_heads, bug
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.scale = nn.Parameter(torch.tensor(self.d_k ** -0.5), requires_grad=False)
        self.to_out = nn.Linear(d_model, d_model)

    def forward(self, Q, prev=None):
        bs = Q.size(0)
        q_s = self.W_Q(Q).view(bs, -1, self.n_heads, self.d_k).transpose(1, 2)
        k_s = self.W_K(Q).view(bs, -1, self.n_heads, self.d_k).permute(0, 2, 3, 1)
        v_s = self.W_V(Q).view(bs, -1, self.n_heads, self.d_k).transpose(1, 2)
        attn_scores = torch.matmul(q_s, k_s) * self.scale
        if prev is not None:
            attn_scores = attn_scores + (prev.transpose(-2, -1) if self.bug == "res-scores-transposed" else prev)
        attn_weights = torch.softmax(attn_scores, dim=-1)
        output = torch.matmul(attn_weights, v_s)
        output = output.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * self.d_k)
        return self.to_out(output), attn_scores


class TSTiEncoder(nn.Module):
    def __init__(self, patch_len, patch_num, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.W_P = nn.Linear(patch_len, d_model)
        self.W_pos = nn.Parameter(torch.randn(patch_num, d_model) * 0.02)
        self.layers = nn.ModuleList(MultiheadAttention(d_model, n_heads, bug) for _ in range(2))
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(2))

    def forward(self, x):                                          # x: [bs x nvars x patch_num x patch_len]
        bs, n_vars = x.shape[:2]
        x = self.W_P(x)                                            # [bs x nvars x patch_num x d_model]
        if self.bug == "channels-merged-without-permute":
            x = x.permute(0, 1, 3, 2)                              # [bs x nvars x d_model x patch_num]
            u = torch.reshape(x, (bs * n_vars, x.shape[3], x.shape[2]))
        else:
            u = torch.reshape(x, (bs * n_vars, x.shape[2], x.shape[3]))
        u = u + self.W_pos
        scores = None
        for layer, norm in zip(self.layers, self.norms):
            out, scores = layer(u, scores)
            u = norm(u + out)
        z = torch.reshape(u, (-1, n_vars, u.shape[-2], u.shape[-1]))
        return z.permute(0, 1, 3, 2)                               # [bs x nvars x d_model x patch_num]


class PatchTST(nn.Module):
    def __init__(self, seq_len, patch_len, d_model, n_heads, pred_len, bug=""):
        super().__init__()
        self.patch_len = patch_len
        patch_num = seq_len // patch_len
        self.backbone = TSTiEncoder(patch_len, patch_num, d_model, n_heads, bug)
        self.head = nn.Linear(d_model * patch_num, pred_len)

    def forward(self, x):                                          # x: [bs x seq_len x nvars]
        z = x.permute(0, 2, 1)
        z = z.unfold(dimension=-1, size=self.patch_len, step=self.patch_len)
        z = self.backbone(z)
        z = self.head(z.flatten(start_dim=-2))                     # [bs x nvars x pred_len]
        return z.permute(0, 2, 1)


BUGS = ("channels-merged-without-permute", "res-scores-transposed")
TWINS = ()
#: T: time steps (T // 4 patches of 4), V: variables (series, channel independence)
DIMS = ("B=2 T=20 V=3 D=32 H=4",)


def build(bug="", B=2, T=20, V=3, D=32, H=4):
    torch.manual_seed(0)
    return PatchTST(T, 4, D, H, 6, bug).eval(), (torch.randn(B, T, V),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
