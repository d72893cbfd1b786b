"""IDEA-Research/DAB-DETR, models/DAB_DETR/transformer.py (``TransformerDecoderLayer``, the cross-attention part)
with models/DAB_DETR/attention.py (its ``MultiheadAttention`` copy, ``vdim`` given): sequence-first ``[T, B, D]``
tensors; the content query ``ca_qcontent_proj(tgt)`` and the memory keys ``ca_kcontent_proj(memory)`` plus their
positions; the conditional spatial query ``ca_qpos_sine_proj(query_sine_embed)``; the per-head concatenation
``q = q.view(num_queries, bs, nhead, n_model // nhead)``, ``query_sine_embed.view(...)``, ``torch.cat([q,
query_sine_embed], dim=3).view(num_queries, bs, n_model * 2)`` (and the same for ``k`` with ``k_pos``), then the
attention with the heads folded batch-major as torch's ``multi_head_attention_forward`` does (``q.contiguous()
.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)``), ``bmm``, softmax, ``bmm``, ``transpose(0, 1)
.contiguous().view(tgt_len, bsz, vdim)``, ``out_proj``; a residual and a norm.

Bugs: ``concat-not-per-head``: ``torch.cat([q, query_sine_embed], dim=2)`` on the flat ``[nq, B, D]`` features
(the per-head ``view`` forgotten: the first heads get only content, the last only position; the natural slip of
simplifying the per-head concatenation);
``heads-folded-head-major``: the queries folded head-major, ``q.view(tgt_len, bsz, num_heads, head_dim)
.permute(0, 2, 1, 3).reshape(tgt_len, num_heads * bsz, head_dim)``, while the keys are folded batch-major as
torch folds them: query rows of one image and head meet keys of another (the fold-order slip of hand-written
``bmm`` attention)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


class ConditionalCrossAttention(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.nhead, self.bug = nhead, bug
        self.ca_qcontent_proj = nn.Linear(d_model, d_model)
        self.ca_qpos_proj = nn.Linear(d_model, d_model)
        self.ca_kcontent_proj = nn.Linear(d_model, d_model)
        self.ca_kpos_proj = nn.Linear(d_model, d_model)
        self.ca_v_proj = nn.Linear(d_model, d_model)
        self.ca_qpos_sine_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def fold(self, x, length, bsz, head_dim, head_major=False):
        if head_major:
            x = x.view(length, bsz, self.nhead, head_dim).permute(0, 2, 1, 3)
            return x.reshape(length, self.nhead * bsz, head_dim).transpose(0, 1)
        return x.contiguous().view(length, bsz * self.nhead, head_dim).transpose(0, 1)

    def forward(self, tgt, memory, pos, query_sine_embed):
        q_content = self.ca_qcontent_proj(tgt)
        k_content = self.ca_kcontent_proj(memory)
        v = self.ca_v_proj(memory)
        num_queries, bs, n_model = q_content.shape
        hw, _, _ = k_content.shape
        k_pos = self.ca_kpos_proj(pos)
        q, k = q_content, k_content + k_pos
        qse = self.ca_qpos_sine_proj(query_sine_embed)
        if self.bug == "concat-not-per-head":
            q = torch.cat([q, qse], dim=2)
            k = torch.cat([k, k_pos], dim=2)
        else:
            q = q.view(num_queries, bs, self.nhead, n_model // self.nhead)
            qse = qse.view(num_queries, bs, self.nhead, n_model // self.nhead)
            q = torch.cat([q, qse], dim=3).view(num_queries, bs, n_model * 2)
            k = k.view(hw, bs, self.nhead, n_model // self.nhead)
            k_pos = k_pos.view(hw, bs, self.nhead, n_model // self.nhead)
            k = torch.cat([k, k_pos], dim=3).view(hw, bs, n_model * 2)
        head_dim = 2 * n_model // self.nhead
        q = q * head_dim ** -0.5
        q = self.fold(q, num_queries, bs, head_dim, head_major=self.bug == "heads-folded-head-major")
        k = self.fold(k, hw, bs, head_dim)
        v = self.fold(v, hw, bs, n_model // self.nhead)
        attn_output_weights = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
        attn_output = torch.bmm(attn_output_weights, v)
        attn_output = attn_output.transpose(0, 1).contiguous().view(num_queries, bs, n_model)
        return self.out_proj(attn_output)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.cross_attn = ConditionalCrossAttention(d_model, nhead, bug)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, tgt, memory, pos, query_sine_embed):
        tgt2 = self.cross_attn(tgt, memory, pos, query_sine_embed)
        return self.norm2(tgt + tgt2)


BUGS = ("concat-not-per-head", "heads-folded-head-major")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
EQUAL = {"B=2 T=6 S=5 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    model = DecoderLayer(D, H, bug).eval()
    return model, (torch.randn(T, B, D), torch.randn(S, B, D), torch.randn(S, B, D), torch.randn(T, B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
