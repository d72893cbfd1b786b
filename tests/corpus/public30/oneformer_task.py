"""huggingface/transformers, src/transformers/models/oneformer/modeling_oneformer.py (v4.46,
``OneFormerTransformerDecoderCrossAttentionLayer``, ``OneFormerTransformerDecoderSelfAttentionLayer``,
``OneFormerTransformerDecoder.forward_prediction_heads``, ``OneFormerTaskModel``): task-conditioned queries. The task
text (``"the task is semantic"``) is embedded by ``OneFormerTaskModel`` (an MLP over its token ids' embeddings) into
one task token ``(B, D)``; the ``Q`` learned object queries ``(Q, D)`` are repeated over the batch
(``unsqueeze(1).repeat(1, B, 1)``, sequence-first) and the task token is prepended as one more query. Each decoder
layer: masked cross-attention of the queries to one pixel-decoder level flattened ``flatten(2).permute(2, 0, 1)`` to
``(h·w, B, D)`` with its position embedding on the keys, through ``nn.MultiheadAttention`` (sequence-first), under
the mask predicted by the last layer (``sigmoid(einsum('bqc,bchw->bqhw')).flatten(2).unsqueeze(1).repeat(1, H, 1,
1).flatten(0, 1) < 0.5``: ``(B·H, Q+1, h·w)`` batch-major, rows that would hide everything cleared), then
self-attention among the queries.

Bugs: ``memory-view-without-permute``: the level flattened ``view(h·w, B, D)`` straight from ``(B, D, h, w)``
(the layout the attention wants, written with a view: the classic slip); ``mask-tiled-head-major``: the predicted
mask tiled ``repeat(H, 1, 1)`` from ``(B, Q+1, h·w)`` (head-major, where ``nn.MultiheadAttention`` reads
``b·H + h``: facebookresearch/Mask2Former #123's question about the order, answered batch-major)."""

import sys

import torch
from torch import nn


class OneFormerTaskModel(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.task_mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, task_ids):
        return self.task_mlp(self.embed(task_ids).mean(1))                  # (B, D)


class CrossAttentionLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.multihead_attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, output, memory, memory_mask, pos, query_pos):
        out = self.multihead_attn(query=output + query_pos, key=memory + pos, value=memory,
                                  attn_mask=memory_mask)[0]
        return self.norm(output + out)


class SelfAttentionLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, output, query_pos):
        q = k = output + query_pos
        return self.norm(output + self.self_attn(q, k, value=output)[0])


class OneFormerTransformerDecoder(nn.Module):
    def __init__(self, dim, heads, num_queries, bug="", vocab=32):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.task_model = OneFormerTaskModel(vocab, dim)
        self.query_feat = nn.Embedding(num_queries, dim)
        self.query_embed = nn.Embedding(num_queries + 1, dim)
        self.level_embed = nn.Embedding(1, dim)
        self.pos_proj = nn.Linear(2, dim)
        self.mask_embed = nn.Linear(dim, dim)
        self.decoder_norm = nn.LayerNorm(dim)
        self.cross, self.self_attn = CrossAttentionLayer(dim, heads), SelfAttentionLayer(dim, heads)

    def prediction_heads(self, output, mask_features):
        decoder_output = self.decoder_norm(output).transpose(0, 1)           # (B, Q+1, D)
        mask_embed = self.mask_embed(decoder_output)
        outputs_mask = torch.einsum("bqc,bchw->bqhw", mask_embed, mask_features)
        attention_mask = outputs_mask.sigmoid().flatten(2)                   # (B, Q+1, h*w)
        if self.bug == "mask-tiled-head-major":
            attention_mask = attention_mask.repeat(self.heads, 1, 1)
        else:
            attention_mask = attention_mask.unsqueeze(1).repeat(1, self.heads, 1, 1).flatten(0, 1)
        attention_mask = (attention_mask < 0.5).detach()
        return attention_mask                                                # (B*H, Q+1, h*w)

    def forward(self, feature, mask_features, task_ids):
        bsz, dim, fh, fw = feature.shape
        ys, xs = torch.meshgrid(torch.linspace(0, 1, fh), torch.linspace(0, 1, fw), indexing="ij")
        pos = self.pos_proj(torch.stack([ys, xs], dim=-1)).flatten(0, 1)[:, None, :]   # (h*w, 1, D)
        if self.bug == "memory-view-without-permute":
            memory = feature.view(fh * fw, bsz, dim)
        else:
            memory = feature.flatten(2).permute(2, 0, 1)                     # (h*w, B, D)
        memory = memory + self.level_embed.weight[None, 0]
        task_token = self.task_model(task_ids).unsqueeze(0)                  # (1, B, D)
        query_embed = self.query_embed.weight.unsqueeze(1).repeat(1, bsz, 1)  # (Q+1, B, D)
        output = self.query_feat.weight.unsqueeze(1).repeat(1, bsz, 1)       # (Q, B, D)
        output = torch.cat([output, task_token], dim=0)                      # (Q+1, B, D)
        attn_mask = self.prediction_heads(output, mask_features)
        attn_mask[torch.where(attn_mask.sum(-1) == attn_mask.shape[-1])] = False
        output = self.cross(output, memory, attn_mask, pos, query_embed)
        output = self.self_attn(output, query_embed)
        return self.decoder_norm(output).transpose(0, 1)                     # (B, Q+1, D)


BUGS = ("memory-view-without-permute", "mask-tiled-head-major")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    num_queries = 6
    model = OneFormerTransformerDecoder(D, H, num_queries, bug).eval()
    feature = torch.randn(B, D, Hp, Wp)
    mask_features = torch.randn(B, D, Hp, Wp)
    task_ids = torch.randint(0, 32, (B, 5))
    return model, (feature, mask_features, task_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
