"""wenet-e2e/wenet, wenet/squeezeformer/encoder.py (``SqueezeformerEncoder.forward``), encoder_layer.py
(``SqueezeformerEncoderLayer``: post-LN attention, feed-forward, convolution, feed-forward), attention.py
(``RelPositionMultiHeadedAttention`` with ``do_rel_shift``: ``linear_pos(pos_emb).view(n_batch_pos, -1, h,
d_k)``, ``pos_bias_u``/``pos_bias_v``, ``matrix_ac + rel_shift(matrix_bd)`` over ``sqrt(d_k)``) and
subsampling.py (``TimeReductionLayer1D``), commit 67b28a5: the frames after the convolutional front end ``(B, T,
D)`` (the front end itself left out), a length mask ``(B, 1, T)``, the sinusoid ``pos_emb`` ``(1, T, D)``; before
the reduce layer the activations are kept, the time reduction (a depthwise ``Conv1d`` of stride 2 over
``xs.transpose(1, 2)``, a pointwise one, the frames cut to ``mask_pad[:, :, ::2]``'s length) halves the frames and
``pos_emb[:, ::2, :]`` the positions; at the recover layer ``torch.repeat_interleave(xs, repeats=2, dim=1)`` doubles
each frame, ``time_recover_layer`` and the kept activations are added back (``recover_tensor + xs[:, :T]``), and the
kept masks and positions are restored.

Bugs: ``recover-tiled``: ``xs.repeat(1, 2, 1)`` for ``repeat_interleave``: the upsampled frames are the reduced
sequence twice over, so frame t reads reduced frame ``t mod T/2`` instead of ``t // 2`` (the second half of the
utterance is added to the first half's frames); ``context-no-transpose``: ``forward_attention``'s
``x.contiguous().view(n_batch, -1, h * d_k)`` without the ``transpose(1, 2)``: heads and frames mixed. Twin:
``recover-unsqueeze-repeat``: the recovery spelled ``xs.unsqueeze(2).repeat(1, 1, 2, 1).flatten(1, 2)`` as
``forward_chunk`` does (correct: the same doubling of each frame)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class RelPositionMultiHeadedAttention(nn.Module):
    def __init__(self, n_head, n_feat, bug=""):
        super().__init__()
        self.bug = bug
        self.d_k = n_feat // n_head
        self.h = n_head
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.linear_pos = nn.Linear(n_feat, n_feat, bias=False)
        self.pos_bias_u = nn.Parameter(torch.randn(self.h, self.d_k) * 0.1)
        self.pos_bias_v = nn.Parameter(torch.randn(self.h, self.d_k) * 0.1)

    def rel_shift(self, x):                                              # (B, H, T, T)
        zero_pad = torch.zeros((x.size(0), x.size(1), x.size(2), 1), dtype=x.dtype)   # (B, H, T, 1)
        x_padded = torch.cat([zero_pad, x], dim=-1)                      # (B, H, T, T+1)
        x_padded = x_padded.view(x.size(0), x.size(1), x.size(3) + 1, x.size(2))   # (B, H, T+1, T)
        return x_padded[:, :, 1:].view_as(x)                             # (B, H, T, T)

    def forward_qkv(self, query, key, value):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k)     # (B, T, H, d_k)
        k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k)       # (B, T, H, d_k)
        v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k)     # (B, T, H, d_k)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)   # (B, H, T, d_k)

    def forward_attention(self, value, scores, mask):                    # (B, H, T, d_k), (B, H, T, T), (B, 1, T)
        n_batch = value.size(0)
        mask = mask.unsqueeze(1).eq(0)                                   # (B, 1, 1, T)
        scores = scores.masked_fill(mask, -float("inf"))
        attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)      # (B, H, T, T)
        x = torch.matmul(attn, value)                                    # (B, H, T, d_k)
        if self.bug == "context-no-transpose":
            x = x.contiguous().view(n_batch, -1, self.h * self.d_k)      # (B, T, D)
        else:
            x = x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)   # (B, T, D)
        return self.linear_out(x)

    def forward(self, query, key, value, mask, pos_emb):
        q, k, v = self.forward_qkv(query, key, value)                    # (B, H, T, d_k)
        q = q.transpose(1, 2)                                            # (B, T, H, d_k)
        n_batch_pos = pos_emb.size(0)
        p = self.linear_pos(pos_emb).view(n_batch_pos, -1, self.h, self.d_k)   # (1, T, H, d_k)
        p = p.transpose(1, 2)                                            # (1, H, T, d_k)
        q_with_bias_u = (q + self.pos_bias_u).transpose(1, 2)            # (B, H, T, d_k)
        q_with_bias_v = (q + self.pos_bias_v).transpose(1, 2)            # (B, H, T, d_k)
        matrix_ac = torch.matmul(q_with_bias_u, k.transpose(-2, -1))     # (B, H, T, T)
        matrix_bd = torch.matmul(q_with_bias_v, p.transpose(-2, -1))     # (B, H, T, T)
        matrix_bd = self.rel_shift(matrix_bd)
        scores = (matrix_ac + matrix_bd) / math.sqrt(self.d_k)
        return self.forward_attention(v, scores, mask)


class ConvolutionModule(nn.Module):
    def __init__(self, channels, kernel_size=5):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(channels, 2 * channels, 1)
        self.depthwise_conv = nn.Conv1d(channels, channels, kernel_size, padding=(kernel_size - 1) // 2,
                                        groups=channels)
        self.norm = nn.BatchNorm1d(channels)
        self.pointwise_conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x, mask_pad):                                      # (B, T, D), (B, 1, T)
        x = x.transpose(1, 2)                                            # (B, D, T)
        x = x.masked_fill(~mask_pad, 0.0)
        x = F.glu(self.pointwise_conv1(x), dim=1)                        # (B, D, T)
        x = F.silu(self.norm(self.depthwise_conv(x)))
        x = self.pointwise_conv2(x).masked_fill(~mask_pad, 0.0)
        return x.transpose(1, 2)                                         # (B, T, D)


class SqueezeformerEncoderLayer(nn.Module):
    def __init__(self, size, n_head, bug=""):
        super().__init__()
        self.self_attn = RelPositionMultiHeadedAttention(n_head, size, bug)
        self.ffn1 = nn.Sequential(nn.Linear(size, 2 * size), nn.SiLU(), nn.Linear(2 * size, size))
        self.conv_module = ConvolutionModule(size)
        self.ffn2 = nn.Sequential(nn.Linear(size, 2 * size), nn.SiLU(), nn.Linear(2 * size, size))
        self.layer_norm1 = nn.LayerNorm(size)
        self.layer_norm2 = nn.LayerNorm(size)
        self.layer_norm3 = nn.LayerNorm(size)
        self.layer_norm4 = nn.LayerNorm(size)

    def forward(self, x, mask, pos_emb, mask_pad):
        x = self.layer_norm1(x + self.self_attn(x, x, x, mask, pos_emb))
        x = self.layer_norm2(x + self.ffn1(x))
        x = self.layer_norm3(x + self.conv_module(x, mask_pad))
        return self.layer_norm4(x + self.ffn2(x))


class TimeReductionLayer1D(nn.Module):
    def __init__(self, channel, out_dim, kernel_size=5, stride=2):
        super().__init__()
        self.stride = stride
        self.padding = max(0, kernel_size - stride)
        self.dw_conv = nn.Conv1d(channel, channel, kernel_size, stride, padding=0, groups=channel)
        self.pw_conv = nn.Conv1d(channel, out_dim, 1, 1, 0)

    def forward(self, xs, xs_lens, mask, mask_pad):                      # (B, T, D), (B,), (B, 1, T), (B, 1, T)
        xs = xs.transpose(1, 2)                                          # (B, D, T)
        xs = xs.masked_fill(~mask_pad, 0.0)
        xs = F.pad(xs, (self.padding, self.padding), "constant", 0.0)    # (B, D, T+6)
        xs = self.pw_conv(self.dw_conv(xs))                              # (B, D, T/2+2)
        xs = xs.transpose(1, 2)                                          # (B, T/2+2, D)
        T = xs.size(1)
        mask = mask[:, ::self.stride, ::self.stride]                     # (B, 1, T/2)
        mask_pad = mask_pad[:, :, ::self.stride]                         # (B, 1, T/2)
        L = mask_pad.size(-1)
        xs = xs[:, :L - T, :].contiguous()                               # (B, T/2, D)
        xs_lens = torch.div(xs_lens + 1, 2, rounding_mode="trunc")
        return xs, xs_lens, mask, mask_pad


class SqueezeformerEncoder(nn.Module):
    def __init__(self, encoder_dim, heads, num_blocks=3, reduce_idx=1, recover_idx=2, max_len=64, bug=""):
        super().__init__()
        self.bug = bug
        self.reduce_idx, self.recover_idx = reduce_idx, recover_idx
        pe = torch.zeros(max_len, encoder_dim)
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)   # (max_len, 1)
        div_term = torch.exp(torch.arange(0, encoder_dim, 2, dtype=torch.float32)
                             * -(math.log(10000.0) / encoder_dim))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))                      # (1, max_len, D)
        self.xscale = math.sqrt(encoder_dim)
        self.preln = nn.LayerNorm(encoder_dim)
        self.encoders = nn.ModuleList([SqueezeformerEncoderLayer(encoder_dim, heads, bug) for _ in range(num_blocks)])
        self.time_reduction_layer = TimeReductionLayer1D(encoder_dim, encoder_dim)
        self.time_recover_layer = nn.Linear(encoder_dim, encoder_dim)

    def forward(self, xs, xs_lens):                                      # (B, T, D), (B,)
        T = xs.size(1)
        masks = (torch.arange(T).unsqueeze(0) < xs_lens.unsqueeze(1)).unsqueeze(1)   # (B, 1, T)
        pos_emb = self.pe[:, :T]                                         # (1, T, D)
        xs = self.preln(xs * self.xscale)
        chunk_masks, mask_pad = masks, masks
        recover_activations = []
        for i, layer in enumerate(self.encoders):
            if i == self.reduce_idx:
                recover_activations.append((xs, chunk_masks, pos_emb, mask_pad))
                xs, xs_lens, chunk_masks, mask_pad = self.time_reduction_layer(xs, xs_lens, chunk_masks, mask_pad)
                pos_emb = pos_emb[:, ::2, :]                             # (1, T/2, D)
            if i == self.recover_idx:
                recover_tensor, chunk_masks, pos_emb, mask_pad = recover_activations.pop()
                if self.bug == "recover-tiled":
                    xs = xs.repeat(1, 2, 1)                              # (B, T, D)
                elif self.bug == "recover-unsqueeze-repeat":
                    xs = xs.unsqueeze(2).repeat(1, 1, 2, 1).flatten(1, 2)   # (B, T, D)
                else:
                    xs = torch.repeat_interleave(xs, repeats=2, dim=1)   # (B, T, D)
                xs = self.time_recover_layer(xs)
                recoverd_t = recover_tensor.size(1)
                xs = recover_tensor + xs[:, :recoverd_t, :].contiguous()   # (B, T, D)
                xs = xs.masked_fill(~chunk_masks[:, 0, :].unsqueeze(-1), 0.0)
            xs = layer(xs, chunk_masks, pos_emb, mask_pad)
        return xs, masks


BUGS = ("recover-tiled", "context-no-transpose")
TWINS = ("recover-unsqueeze-repeat",)
DIMS = ("B=2 T=8 D=32 H=4",)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    model = SqueezeformerEncoder(D, H, bug=bug).eval()
    lengths = torch.tensor([T - 2 * (i % 2) for i in range(B)])
    return model, (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
