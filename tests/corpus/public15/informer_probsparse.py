"""zhouhaoyi/Informer2020, models/attn.py (``ProbAttention``, ``AttentionLayer``): inputs laid out ``(B, L, H,
d)`` (``AttentionLayer``: ``query_projection(queries).view(B, L, H, -1)``) and transposed to ``(B, H, L, d)``;
``_prob_QK``: ``K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)``, ``index_sample = torch.randint(L_K,
(L_Q, sample_k))``, ``K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]``, ``Q_K_sample
= (Q.unsqueeze(-2) @ K_sample.transpose(-2, -1)).squeeze()``; the sparsity ``M = Q_K_sample.max(-1)[0] -
torch.div(Q_K_sample.sum(-1), L_K)``, ``M_top = M.topk(n_top, sorted=False)[1]``, ``Q_reduce = Q[torch.arange(B)
[:, None, None], torch.arange(H)[None, :, None], M_top, :]``, ``Q_K = Q_reduce @ K.transpose(-2, -1)``;
``_get_initial_context``: ``V.mean(dim=-2)`` expanded over the queries (``mask_flag=False``, the encoder);
``_update_context``: ``context_in[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :] =
torch.matmul(attn, V)``; back ``transpose(2, 1)`` and ``out.view(B, L, -1)``, ``out_projection``. (The sampled
key index is drawn from a fixed generator here, so both variants sample alike.)

Bugs (argument): ``sample-indices-swapped``: ``K_expand[:, :, index_sample, torch.arange(L_Q).unsqueeze(1),
:]`` (the two index tensors written in the other order: with L_Q = L_K it runs, and every "sampled" key is the
query's own key, so the sparsity measure ranks queries by nothing; a silent slip no shape shows);
``out-without-transpose``: the context viewed ``(B, L, -1)`` straight from ``(B, H, L, d)`` (``transpose(2,
1)`` dropped, Informer's ``output_attention`` path written without it)."""

import math
import sys

import torch
from torch import nn


class ProbAttention(nn.Module):
    def __init__(self, factor=2, bug=""):
        super().__init__()
        self.factor, self.bug = factor, bug

    def _prob_QK(self, Q, K, sample_k, n_top):                                   # (B, H, L, E)
        B, H, L_K, E = K.shape
        _, _, L_Q, _ = Q.shape
        K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
        index_sample = torch.randint(L_K, (L_Q, sample_k), generator=torch.Generator().manual_seed(1))
        if self.bug == "sample-indices-swapped":
            K_sample = K_expand[:, :, index_sample, torch.arange(L_Q).unsqueeze(1), :]
        else:
            K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]
        Q_K_sample = torch.matmul(Q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)
        M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), L_K)
        M_top = M.topk(n_top, sorted=False)[1]
        Q_reduce = Q[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], M_top, :]
        return torch.matmul(Q_reduce, K.transpose(-2, -1)), M_top

    def _update_context(self, context_in, V, scores, index):
        B, H, L_V, D = V.shape
        attn = torch.softmax(scores, dim=-1)
        context_in[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :] = \
            torch.matmul(attn, V).type_as(context_in)
        return context_in

    def forward(self, queries, keys, values):                                    # (B, L, H, d)
        B, L_Q, H, D = queries.shape
        _, L_K, _, _ = keys.shape
        queries, keys, values = queries.transpose(2, 1), keys.transpose(2, 1), values.transpose(2, 1)
        U_part = min(self.factor * int(math.ceil(math.log(L_K))), L_K)
        u = min(self.factor * int(math.ceil(math.log(L_Q))), L_Q)
        scores_top, index = self._prob_QK(queries, keys, sample_k=U_part, n_top=u)
        scores_top = scores_top * (1.0 / math.sqrt(D))
        context = values.mean(dim=-2).unsqueeze(-2).expand(B, H, L_Q, D).clone()
        context = self._update_context(context, values, scores_top, index)
        return context if self.bug == "out-without-transpose" else context.transpose(2, 1).contiguous()


class AttentionLayer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.inner_attention, self.n_heads = ProbAttention(bug=bug), n_heads
        self.query_projection, self.key_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.value_projection, self.out_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values):                                    # (B, L, D)
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)
        out = self.inner_attention(queries, keys, values)
        return self.out_projection(out.reshape(B, L, -1))


class Encoder(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.attention = AttentionLayer(d_model, n_heads, bug)

    def forward(self, x):                                                        # (B, T, D)
        return x + self.attention(x, x, x)


BUGS = ("sample-indices-swapped", "out-without-transpose")
TWINS = ()
DIMS = ("B=2 T=12 D=32 H=4",)
EQUAL = {"B=2 T=12 D=32 H=4": "B=4 T=12 D=32 H=4"}


def build(bug="", B=2, T=12, D=32, H=4):
    torch.manual_seed(0)
    return Encoder(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
