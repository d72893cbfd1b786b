"""thuml/Nonstationary_Transformers, ns_layers/SelfAttention_Family.py (``DSAttention``, ``AttentionLayer``)
and ns_models/ns_Transformer.py (``Projector``, ``Model.forward``), commit 8b6356d: the series ``x_enc`` ``(B, S,
E)`` (S time steps, E variates) normalised over time (``mean(1, keepdim=True)``, ``var(1, unbiased=False)``, both
``detach``\\ ed, ``(B, 1, E)``); two ``Projector``\\ s learn the de-stationary factors from the raw series and its
statistics: ``series_conv`` (``Conv1d(seq_len, 1, 3, padding=1, padding_mode='circular', bias=False)``: the
time steps are its channels) ``(B, 1, E)``, ``cat([x, stats], dim=1)`` ``(B, 2, E)``, ``view(B, -1)``, an MLP to
``tau`` (one per series, ``exp``) and ``delta`` (one per key step, ``(B, S)``); ``DSAttention``: ``tau.unsqueeze(1)
.unsqueeze(1)`` ``(B, 1, 1, 1)``, ``delta.unsqueeze(1).unsqueeze(1)`` ``(B, 1, 1, S)``, ``einsum("blhe,bshe->bhls")
* tau + delta``, ``softmax(scale * scores, -1)``, ``einsum("bhls,bshd->blhd")``; ``AttentionLayer``'s ``view(B, L,
H, -1)``; the value embedding a circular ``Conv1d(E, D, 3)`` over time (``TokenEmbedding``); the output projected
back to the variates and de-normalised ``* std_enc + mean_enc``. Here S is T (the encoder's self-attention: L = S).

Bug: ``delta-over-queries``: ``delta.unsqueeze(1).unsqueeze(-1)`` ``(B, 1, S, 1)``: one shift per *query* row,
which the softmax over the keys cancels (L = S, so every shape agrees and the learnt delta does nothing)."""

import math
import sys

import torch
from torch import nn


class DSAttention(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, queries, keys, values, tau, delta):                          # (B, L, H, E), (B, S, H, E)
        B, L, H, E = queries.shape
        scale = 1.0 / math.sqrt(E)
        tau = tau.unsqueeze(1).unsqueeze(1)                                          # (B, 1, 1, 1)
        if self.bug == "delta-over-queries":
            delta = delta.unsqueeze(1).unsqueeze(-1)                                 # (B, 1, S, 1)
        else:
            delta = delta.unsqueeze(1).unsqueeze(1)                                  # (B, 1, 1, S)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys) * tau + delta        # (B, H, L, S)
        A = torch.softmax(scale * scores, dim=-1)
        return torch.einsum("bhls,bshd->blhd", A, values).contiguous()               # (B, L, H, d)


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.inner_attention = DSAttention(bug)
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.out_projection = nn.Linear(d_model, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values, tau, delta):                          # (B, L, D), (B, S, D)
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)                   # (B, L, H, d)
        keys = self.key_projection(keys).view(B, S, H, -1)                           # (B, S, H, d)
        values = self.value_projection(values).view(B, S, H, -1)                     # (B, S, H, d)
        out = self.inner_attention(queries, keys, values, tau, delta)
        out = out.view(B, L, -1)                                                     # (B, L, D)
        return self.out_projection(out)


class Projector(nn.Module):
    def __init__(self, enc_in, seq_len, hidden, output_dim):
        super().__init__()
        self.series_conv = nn.Conv1d(seq_len, 1, kernel_size=3, padding=1, padding_mode="circular", bias=False)
        self.backbone = nn.Sequential(nn.Linear(2 * enc_in, hidden), nn.ReLU(),
                                      nn.Linear(hidden, output_dim, bias=False))

    def forward(self, x, stats):                                                   # (B, S, E), (B, 1, E)
        batch_size = x.shape[0]
        x = self.series_conv(x)                                                      # (B, 1, E)
        x = torch.cat([x, stats], dim=1)                                             # (B, 2, E)
        x = x.view(batch_size, -1)                                                   # (B, 2*E)
        return self.backbone(x)                                                      # (B, O)


class NSEncoder(nn.Module):
    def __init__(self, enc_in, seq_len, d_model, n_heads, bug=""):
        super().__init__()
        self.value_embedding = nn.Conv1d(enc_in, d_model, kernel_size=3, padding=1, padding_mode="circular",
                                         bias=False)
        self.tau_learner = Projector(enc_in, seq_len, 16, 1)
        self.delta_learner = Projector(enc_in, seq_len, 16, seq_len)
        self.attention = AttentionLayer(d_model, n_heads, bug)
        self.norm = nn.LayerNorm(d_model)
        self.projection = nn.Linear(d_model, enc_in)

    def forward(self, x_enc):                                                      # (B, S, E)
        x_raw = x_enc.clone().detach()
        mean_enc = x_enc.mean(1, keepdim=True).detach()                              # (B, 1, E)
        x_enc = x_enc - mean_enc
        std_enc = torch.sqrt(torch.var(x_enc, dim=1, keepdim=True, unbiased=False) + 1e-5).detach()  # (B, 1, E)
        x_enc = x_enc / std_enc
        tau = self.tau_learner(x_raw, std_enc).exp()                                 # (B, 1)
        delta = self.delta_learner(x_raw, mean_enc)                                  # (B, S)
        x = self.value_embedding(x_enc.permute(0, 2, 1)).transpose(1, 2)             # (B, S, D)
        x = self.norm(x + self.attention(x, x, x, tau, delta))
        out = self.projection(x)                                                     # (B, S, E)
        return out * std_enc + mean_enc


BUGS = ("delta-over-queries",)
TWINS = ()
DIMS = ("B=2 T=12 D=32 H=4",)


def build(bug="", B=2, T=12, D=32, H=4):
    torch.manual_seed(0)
    return NSEncoder(7, T, D, H, bug).eval(), (torch.randn(B, T, 7),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
