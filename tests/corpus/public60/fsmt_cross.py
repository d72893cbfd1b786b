"""huggingface/transformers, src/transformers/models/fsmt/modeling_fsmt.py (v4.46, ``Attention``,
``DecoderLayer``, ``FSMTDecoder.forward``, ``fill_with_neg_inf``): the port of fairseq's WMT19 translation models
(facebook/wmt19-en-de), time-first throughout. ``FSMTDecoder.forward`` turns the target embeddings and the encoder's
states from batch-first to ``(T, B, C)``/``(S, B, C)`` by ``transpose(0, 1)``; each ``Attention`` projects
``q_proj(query) * scaling``, folds the heads batch-major by ``_shape`` (``tensor.contiguous().view(seq_len, bsz *
num_heads, head_dim).transpose(0, 1)``: row ``b * H + h``), ``torch.bmm(q, k.transpose(1, 2))`` ``(B·H, T, S)``,
adds the ``attn_mask`` ``(T, T)`` (``triu(fill_with_neg_inf(zeros(T, T)), 1)``), applies the ``key_padding_mask``
``(B, S)`` on the view ``(B, H, T, S)`` by ``masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), -inf)``,
``softmax(dim=-1)``, ``bmm`` with v, ``transpose(0, 1).contiguous().view(T, B, C)``, ``out_proj``. The decoder layer
is post-norm: causal self-attention, then ``encoder_attn`` (``encoder_decoder_attention=True``: keys and values from
the encoder's states, ``static_kv``) under the source padding mask; the second sentence's last two source tokens
are padding.

Bugs: ``kpm-repeat-heads-major``: the source padding folded onto the ``(B·H, T, S)`` scores by
``key_padding_mask.repeat(num_heads, 1)[:, None, :]`` (head-major rows ``h * B + b`` against fairseq's batch-major
fold, the slip of ports that skip the ``(B, H, T, S)`` view: each row gets another sentence's padding);
``encoder-states-batch-first``: the encoder's output handed to the layers batch-first, the ``transpose(0, 1)``
dropped (a user feeding an HF-style ``(B, S, C)`` encoder output to the time-first decoder: ``_shape``'s view then
cuts the ``(B, S, C)`` memory into ``(S, B·H, d)`` rows that mix sentences and positions; the padding mask still
has ``S`` columns, so nothing raises)."""

import sys

import torch
from torch import nn


def fill_with_neg_inf(t):
    return t.float().fill_(float("-inf")).type_as(t)


class Attention(nn.Module):
    def __init__(self, embed_dim, num_heads, encoder_decoder_attention=False, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.encoder_decoder_attention = encoder_decoder_attention
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.contiguous().view(seq_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)   # (B·H, L, d)

    def forward(self, query, key, key_padding_mask=None, attn_mask=None):
        tgt_len, bsz, embed_dim = query.size()                                       # (T, B, C)
        q = self.q_proj(query) * self.scaling
        kv = key if self.encoder_decoder_attention else query                         # static_kv: the encoder's
        k, v = self.k_proj(kv), self.v_proj(kv)                                      # (S, B, C)
        q = self._shape(q, tgt_len, bsz)                                             # (B·H, T, d)
        k = self._shape(k, -1, bsz)                                                  # (B·H, S, d)
        v = self._shape(v, -1, bsz)                                                  # (B·H, S, d)
        src_len = k.size(1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))                               # (B·H, T, S)
        if attn_mask is not None:
            attn_weights += attn_mask
        if key_padding_mask is not None:
            assert key_padding_mask.shape == (bsz, src_len)
            if self.bug == "kpm-repeat-heads-major":
                attn_weights = attn_weights.masked_fill(key_padding_mask.repeat(self.num_heads, 1)[:, None, :],
                                                        float("-inf"))               # (B·H, T, S)
            else:
                attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)   # (B, H, T, S)
                reshaped = key_padding_mask.unsqueeze(1).unsqueeze(2)                     # (B, 1, 1, S)
                attn_weights = attn_weights.masked_fill(reshaped, float("-inf"))
                attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)  # (B·H, T, S)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, v)                                     # (B·H, T, d)
        attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)   # (T, B, C)
        return self.out_proj(attn_output)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, heads, bug=""):
        super().__init__()
        self.self_attn = Attention(d_model, heads, bug=bug)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.encoder_attn = Attention(d_model, heads, encoder_decoder_attention=True, bug=bug)
        self.encoder_attn_layer_norm = nn.LayerNorm(d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, 2 * d_model), nn.Linear(2 * d_model, d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)

    def forward(self, x, encoder_hidden_states, encoder_attn_mask, causal_mask):
        x = self.self_attn_layer_norm(x + self.self_attn(x, x, attn_mask=causal_mask))
        x = self.encoder_attn_layer_norm(x + self.encoder_attn(x, encoder_hidden_states,
                                                               key_padding_mask=encoder_attn_mask))
        return self.final_layer_norm(x + self.fc2(torch.relu(self.fc1(x))))


class FSMTDecoder(nn.Module):
    def __init__(self, vocab, d_model, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, d_model, padding_idx=1)
        self.embed_scale = d_model ** 0.5
        self.layer = DecoderLayer(d_model, heads, bug)

    def forward(self, input_ids, encoder_hidden_states, encoder_padding_mask):     # (B, T), (B, S, C), (B, S)
        tgt_len = input_ids.size(1)
        x = self.embed_tokens(input_ids) * self.embed_scale                         # (B, T, C)
        causal_mask = torch.triu(fill_with_neg_inf(torch.zeros(tgt_len, tgt_len)), 1)   # (T, T)
        x = x.transpose(0, 1)                                                        # (T, B, C)
        if self.bug != "encoder-states-batch-first":
            encoder_hidden_states = encoder_hidden_states.transpose(0, 1)            # (S, B, C)
        x = self.layer(x, encoder_hidden_states, encoder_padding_mask, causal_mask)
        return x.transpose(0, 1)                                                     # (B, T, C)


BUGS = ("kpm-repeat-heads-major", "encoder-states-batch-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=4"}


def build(bug="", B=2, T=6, D=32, H=4, S=5):  # noqa: N803
    torch.manual_seed(0)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[1, -2:] = True                                                           # the second source padded
    input_ids = torch.randint(2, 50, (B, T))
    return FSMTDecoder(50, D, H, bug=bug).eval(), (input_ids, torch.randn(B, S, D), padding)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
