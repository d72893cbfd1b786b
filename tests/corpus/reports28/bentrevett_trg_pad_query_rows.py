"""bentrevett/pytorch-seq2seq issue #96 ("there is a little error in the make_trg_mask function in tutorial 6"):
the Transformer tutorial's ``Seq2Seq.make_trg_mask`` built the target padding mask with
``(trg != self.trg_pad_idx).unsqueeze(1).unsqueeze(3)``, shape ``[batch, 1, trg_len, 1]``, and ANDed it with the
``[trg_len, trg_len]`` subsequent mask: the padding then masks the *query rows* of the pad tokens (their rows
become all masked) while every real token still attends to the pads after it is allowed by the causal mask. The
tutorial's own explanation (and the source mask) puts the padding on the *key* axis: ``.unsqueeze(1).unsqueeze(2)``,
``[batch, 1, 1, trg_len]``.

The idiom: the tutorial's ``MultiHeadAttentionLayer`` (``fc_q``/``fc_k``/``fc_v``/``fc_o``, ``view(batch_size,
-1, n_heads, head_dim).permute(0, 2, 1, 3)``, ``energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale``,
``energy.masked_fill(mask == 0, -1e10)``, softmax over the keys, ``permute(0, 2, 1, 3).contiguous()`` and
``view(batch_size, -1, hid_dim)``), a decoder's token and position embeddings (``* self.scale`` on the tokens),
its masked self-attention with the residual LayerNorm; the target ids carry trailing pads (id 0) in the
second sequence.

Bug (mask axis): ``pad-on-queries``: the target padding mask unsqueezed at 3 (query rows) instead of 2 (keys)."""

import sys

import torch
from torch import nn

BUGS = ("pad-on-queries",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
PAD = 0


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim, n_heads):
        super().__init__()
        self.hid_dim, self.n_heads, self.head_dim = hid_dim, n_heads, hid_dim // n_heads
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        self.scale = torch.sqrt(torch.FloatTensor([self.head_dim]))

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        Q, K, V = self.fc_q(query), self.fc_k(key), self.fc_v(value)
        Q = Q.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = K.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = V.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)
        attention = torch.softmax(energy, dim=-1)
        x = torch.matmul(attention, V)
        x = x.permute(0, 2, 1, 3).contiguous()
        x = x.view(batch_size, -1, self.hid_dim)
        return self.fc_o(x), attention


class DecoderSelfAttention(nn.Module):
    def __init__(self, vocab, hid_dim, n_heads, max_length=100, bug=""):
        super().__init__()
        self.bug = bug
        self.tok_embedding = nn.Embedding(vocab, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.self_attention = MultiHeadAttentionLayer(hid_dim, n_heads)
        self.self_attn_layer_norm = nn.LayerNorm(hid_dim)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim]))

    def make_trg_mask(self, trg):
        if self.bug == "pad-on-queries":
            trg_pad_mask = (trg != PAD).unsqueeze(1).unsqueeze(3)           # [batch, 1, trg_len, 1]
        else:
            trg_pad_mask = (trg != PAD).unsqueeze(1).unsqueeze(2)           # [batch, 1, 1, trg_len]
        trg_len = trg.shape[1]
        trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len))).bool()
        return trg_pad_mask & trg_sub_mask

    def forward(self, trg):
        batch_size, trg_len = trg.shape
        trg_mask = self.make_trg_mask(trg)
        pos = torch.arange(0, trg_len).unsqueeze(0).repeat(batch_size, 1)
        x = self.tok_embedding(trg) * self.scale + self.pos_embedding(pos)
        _x, _ = self.self_attention(x, x, x, trg_mask)
        return self.self_attn_layer_norm(x + _x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    trg = torch.randint(1, 50, (B, T))
    trg[1:, T - 2:] = PAD                                                   # the later sequences end in pads
    return DecoderSelfAttention(50, D, H, bug=bug).eval(), (trg,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
