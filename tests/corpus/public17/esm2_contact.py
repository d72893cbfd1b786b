"""facebookresearch/esm, esm/multihead_attention.py (``MultiheadAttention`` with ``use_rotary_embeddings``),
esm/rotary_embedding.py (``RotaryEmbedding``, ``rotate_half``), esm/modules.py (``ContactPredictionHead``,
``symmetrize``, ``apc``) and esm/model/esm2.py (``ESM2.forward``), v2.0.0: the layers run sequence-first ``(T, B,
D)``; ``q = q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)`` (and k, v); ``q *= scaling``
before the product; rotary on ``(B*H, T, d)`` with ``cos[:, :x.shape[-2], :]``; ``attn_weights = torch.bmm(q,
k.transpose(1, 2))``, the key padding mask filled on ``attn_weights.view(bsz, H, T, S)`` with
``key_padding_mask.unsqueeze(1).unsqueeze(2)``; ``softmax``; ``bmm(attn_probs, v).transpose(0, 1).contiguous()
.view(tgt_len, bsz, embed_dim)``; with ``need_head_weights`` the weights ``view(bsz, H, T, S).transpose(1, 0)``.
ESM2 stacks each layer's ``attn.transpose(1, 0)`` into ``attentions`` ``(B, L, H, T, T)``; the contact head views
them ``(B, L*H, T, T)``, ``apc(symmetrize(...))``, ``permute(0, 2, 3, 1)``, ``regression`` and ``sigmoid``
(the bos/eos rows and the padding cut away as ESM does: here the tokens carry neither, so nothing is cut).

Bugs (argument): ``heads-view-without-transpose``: ``q.contiguous().view(bsz * num_heads, tgt_len, head_dim)``
on the sequence-first ``(T, B, D)`` projection (the batch-first habit: rows of tokens cut as heads);
``apc-row-sums-twice``: ``a2 = x.sum(-1, keepdims=True)`` where ``x.sum(-2, ...)`` is meant (the column sums of
the average product correction taken as row sums again; no shape shows it)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, q, k):                                                       # (B*H, T, d)
        t = torch.arange(k.shape[-2]).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, :, :], emb.sin()[None, :, :]                    # (1, T, d)
        cos, sin = cos[:, : q.shape[-2], :], sin[:, : q.shape[-2], :]
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, embed_dim // num_heads, bug
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.rot_emb = RotaryEmbedding(self.head_dim)

    def heads(self, x, tgt_len, bsz):                                              # (T, B, D)
        if self.bug == "heads-view-without-transpose":
            return x.contiguous().view(bsz * self.num_heads, tgt_len, self.head_dim)
        return x.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)

    def forward(self, query, key_padding_mask):                                    # (T, B, D), (B, T)
        tgt_len, bsz, embed_dim = query.size()
        q = self.q_proj(query) * self.scaling
        k, v = self.k_proj(query), self.v_proj(query)
        q, k, v = self.heads(q, tgt_len, bsz), self.heads(k, tgt_len, bsz), self.heads(v, tgt_len, bsz)
        q, k = self.rot_emb(q, k)                                                    # (B*H, T, d)
        src_len = k.size(1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))                               # (B*H, T, S)
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_probs, v)                                              # (B*H, T, d)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        attn = self.out_proj(attn)
        attn_weights = attn_probs.view(bsz, self.num_heads, tgt_len, src_len).transpose(1, 0)   # (H, B, T, S)
        return attn, attn_weights


class TransformerLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.self_attn = MultiheadAttention(dim, heads, bug)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x, padding_mask):                                            # (T, B, D)
        h, attn = self.self_attn(self.self_attn_layer_norm(x), padding_mask)
        x = x + h
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x)))), attn


def symmetrize(x):
    return x + x.transpose(-1, -2)


def apc(x, bug=""):
    a1 = x.sum(-1, keepdims=True)
    a2 = x.sum(-1, keepdims=True) if bug == "apc-row-sums-twice" else x.sum(-2, keepdims=True)
    a12 = x.sum((-1, -2), keepdims=True)
    avg = a1 * a2
    avg.div_(a12)
    return x - avg


class ContactPredictionHead(nn.Module):
    def __init__(self, in_features, bug=""):
        super().__init__()
        self.bug = bug
        self.regression = nn.Linear(in_features, 1)

    def forward(self, attentions):                                                 # (B, L, H, T, T)
        batch_size, layers, heads, seqlen, _ = attentions.size()
        attentions = attentions.view(batch_size, layers * heads, seqlen, seqlen)
        attentions = apc(symmetrize(attentions), self.bug)
        attentions = attentions.permute(0, 2, 3, 1)                                  # (B, T, T, L*H)
        return torch.sigmoid(self.regression(attentions).squeeze(3))                 # (B, T, T)


class ESM2(nn.Module):
    def __init__(self, dim, heads, layers=2, vocab=33, padding_idx=1, bug=""):
        super().__init__()
        self.padding_idx = padding_idx
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=padding_idx)
        self.layers = nn.ModuleList([TransformerLayer(dim, heads, bug) for _ in range(layers)])
        self.emb_layer_norm_after = nn.LayerNorm(dim)
        self.contact_head = ContactPredictionHead(layers * heads, bug)

    def forward(self, tokens):                                                     # (B, T)
        padding_mask = tokens.eq(self.padding_idx)
        x = self.embed_tokens(tokens)
        x = x * (1 - padding_mask.unsqueeze(-1).type_as(x))
        x = x.transpose(0, 1)                                                        # (T, B, D)
        attn_weights = []
        for layer in self.layers:
            x, attn = layer(x, padding_mask)
            attn_weights.append(attn.transpose(1, 0))                                # (B, H, T, T)
        x = self.emb_layer_norm_after(x).transpose(0, 1)
        attentions = torch.stack(attn_weights, 1)                                    # (B, L, H, T, T)
        return x, self.contact_head(attentions)


BUGS = ("heads-view-without-transpose", "apc-row-sums-twice")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    tokens = torch.randint(4, 24, (B, T))
    tokens[-1, -2:] = 1                                                             # the last sequence padded
    return ESM2(D, H, bug=bug).eval(), (tokens,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
