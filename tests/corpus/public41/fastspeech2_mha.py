"""ming024/FastSpeech2, transformer/SubLayers.py (``MultiHeadAttention``), transformer/Modules.py
(``ScaledDotProductAttention``), transformer/Layers.py (``FFTBlock``) and utils/tools.py
(``get_mask_from_lengths``), master: ``w_qs``/``w_ks``/``w_vs`` viewed ``(sz_b, len_q, n_head, d_k)``, folded
head-major by ``permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)`` (``(n*b) x lq x dk``); the key padding
mask ``ids >= lengths.unsqueeze(1)`` widened by ``mask.unsqueeze(1).expand(-1, max_len, -1)`` and folded as the
heads are by ``mask.repeat(n_head, 1, 1)``; ``bmm`` scores over ``temperature = d_k ** 0.5``, ``masked_fill(mask,
-inf)``, ``Softmax(dim=2)``, ``bmm`` with v; the output unfolded by ``view(n_head, sz_b, len_q, d_v)`` and
``permute(1, 2, 0, 3).contiguous().view(sz_b, len_q, -1)``, ``fc``, post-norm ``layer_norm(output + residual)``,
then the padded frames zeroed by ``masked_fill(mask.unsqueeze(-1), 0)``.

Bugs (natural slips): ``mask-repeat-interleave``: the mask folded by ``mask.repeat_interleave(n_head, 0)``
(batch-major rows, the order of a ``view(b * n_head, ...)`` fold) while the scores are folded head-major: each
head row gets another utterance's padding; ``output-unfold-batch-major``: the output unfolded by
``view(sz_b, n_head, len_q, d_v).permute(0, 2, 1, 3)`` (the batch-major order of other ports) from head-major
rows: heads and utterances mixed."""

import sys

import torch
from torch import nn


def get_mask_from_lengths(lengths, max_len):
    batch_size = lengths.shape[0]
    ids = torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1)
    return ids >= lengths.unsqueeze(1).expand(-1, max_len)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature
        self.softmax = nn.Softmax(dim=2)

    def forward(self, q, k, v, mask=None):
        attn = torch.bmm(q, k.transpose(1, 2))
        attn = attn / self.temperature
        if mask is not None:
            attn = attn.masked_fill(mask, -float("inf"))
        attn = self.softmax(attn)
        return torch.bmm(attn, v), attn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, bug=""):
        super().__init__()
        self.bug = bug
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k)
        self.w_ks = nn.Linear(d_model, n_head * d_k)
        self.w_vs = nn.Linear(d_model, n_head * d_v)
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)
        self.layer_norm = nn.LayerNorm(d_model)
        self.fc = nn.Linear(n_head * d_v, d_model)

    def forward(self, q, k, v, mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, _ = q.size()
        sz_b, len_k, _ = k.size()
        sz_b, len_v, _ = v.size()
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)
        q = q.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)
        k = k.permute(2, 0, 1, 3).contiguous().view(-1, len_k, d_k)
        v = v.permute(2, 0, 1, 3).contiguous().view(-1, len_v, d_v)
        if self.bug == "mask-repeat-interleave":
            mask = mask.repeat_interleave(n_head, 0)
        else:
            mask = mask.repeat(n_head, 1, 1)
        output, attn = self.attention(q, k, v, mask=mask)
        if self.bug == "output-unfold-batch-major":
            output = output.view(sz_b, n_head, len_q, d_v).permute(0, 2, 1, 3)
        else:
            output = output.view(n_head, sz_b, len_q, d_v).permute(1, 2, 0, 3)
        output = output.contiguous().view(sz_b, len_q, -1)
        output = self.fc(output)
        return self.layer_norm(output + residual), attn


class FFTBlock(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_model // n_head, d_model // n_head, bug)

    def forward(self, enc_input, mask, slf_attn_mask):
        enc_output, _ = self.slf_attn(enc_input, enc_input, enc_input, mask=slf_attn_mask)
        return enc_output.masked_fill(mask.unsqueeze(-1), 0)


class Encoder(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.layer_stack = nn.ModuleList([FFTBlock(d_model, n_head, bug)])

    def forward(self, src_seq, src_lens):
        max_len = src_seq.shape[1]
        mask = get_mask_from_lengths(src_lens, max_len)
        slf_attn_mask = mask.unsqueeze(1).expand(-1, max_len, -1)
        enc_output = src_seq
        for enc_layer in self.layer_stack:
            enc_output = enc_layer(enc_output, mask=mask, slf_attn_mask=slf_attn_mask)
        return enc_output


BUGS = ("mask-repeat-interleave", "output-unfold-batch-major")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = Encoder(D, H, bug).eval()
    lengths = torch.tensor([T - (i % 3) for i in range(B)])
    return model, (torch.randn(B, T, D), lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
