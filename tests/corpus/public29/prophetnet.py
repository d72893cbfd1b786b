"""huggingface/transformers, src/transformers/models/prophetnet/modeling_prophetnet.py (v4.46,
``ProphetNetNgramSelfAttention``, ``ngram_attention_bias``, ``ProphetNetDecoder``): the decoder's n-stream
self-attention. The main stream (token embeddings plus learnt positions, ``(B, T, D)``) and ``ngram`` predicting
streams (each ``ngram_embeddings.weight[i]`` plus the positions, ``repeat(B, 1, 1)``) are joined along the tokens,
``(B, (1 + ngram) * T, D)``; ``q_proj(h) * scaling``, ``k_proj``, ``v_proj``, each ``view(B, -1, H, d).transpose(1,
2)`` and ``chunk(1 + ngram, dim=2)``; the main stream attends causally to itself (``einsum("bntc,bncs->bnts", q,
k.transpose(2, 3))``); each predicting stream's queries attend to the main keys and its own stream's keys
(``cat([main_key, key], 2)``, ``stack`` over the streams), under ``ngram_attention_bias``: stream ``i`` at step ``t``
sees main tokens ``0 .. t - i`` (``left_block[i].triu_(-i + 1)``) and its own step ``t`` (the right block's diagonal);
``softmax(dim=-1)``, the outputs ``transpose(2, 3).reshape(B, ngram, T, D)``, joined to the main output along the
streams and ``view(B, -1, D)``, ``out_proj``. (The relative position buckets are left out: a smaller model.)

Bugs: ``stream-offset-sign``: ``left_block[i].triu_(i + 1)`` (the stream's offset with its sign reversed: stream
1 sees main token ``t + 1``, the very token it is trained to predict); ``predict-merge-no-transpose``: the
predicting streams' output ``reshape(B, ngram, T, D)`` straight from ``(B, ngram, H, T, d)`` (the
``transpose(2, 3)`` dropped, heads and steps interleaved)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


def ngram_attention_bias(sequence_length, ngram, dtype, bug=""):
    left_block = torch.ones((ngram, sequence_length, sequence_length), dtype=dtype) * torch.finfo(dtype).min
    right_block = left_block.detach().clone()
    for stream_idx in range(ngram):
        right_block[stream_idx].fill_diagonal_(0, wrap=False)
        left_block[stream_idx].triu_((stream_idx if bug == "stream-offset-sign" else -stream_idx) + 1)
    left_block[:, :, 0] = 0
    return torch.cat([left_block, right_block], dim=2)                 # (ngram, T, 2T)


class ProphetNetNgramSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attn_heads, ngram, bug=""):
        super().__init__()
        self.hidden_size, self.num_attn_heads, self.ngram, self.bug = hidden_size, num_attn_heads, ngram, bug
        self.head_dim = hidden_size // num_attn_heads
        self.key_proj, self.value_proj = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.query_proj, self.out_proj = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)

    def _shape(self, tensor, seq_len, batch_size):
        return tensor.view(batch_size, seq_len, self.num_attn_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, main_attention_mask, predict_attention_mask):
        batch_size, ngram_sequence_length, hidden_size = hidden_states.size()
        query_states = self.query_proj(hidden_states) / (self.head_dim ** 0.5)
        key_states = self.key_proj(hidden_states)
        value_states = self.value_proj(hidden_states)
        query_states = self._shape(query_states, ngram_sequence_length, batch_size)
        key_states = self._shape(key_states, -1, batch_size)
        value_states = self._shape(value_states, -1, batch_size)

        query_states_list = query_states.chunk(1 + self.ngram, dim=2)
        key_states_list = key_states.chunk(1 + self.ngram, dim=2)
        value_states_list = value_states.chunk(1 + self.ngram, dim=2)
        main_query_states, predict_query_states_list = query_states_list[0], query_states_list[1:]
        main_key_states, predict_key_states_list = key_states_list[0], key_states_list[1:]
        main_value_states, predict_value_states_list = value_states_list[0], value_states_list[1:]
        sequence_length = ngram_sequence_length // (1 + self.ngram)

        main_attn_weights = torch.einsum("bntc,bncs->bnts", main_query_states, main_key_states.transpose(2, 3))
        main_attn_weights = main_attn_weights + main_attention_mask
        main_attn_probs = F.softmax(main_attn_weights, dim=-1)
        main_attn_output = torch.einsum("bntc,bncs->bnts", main_attn_probs, main_value_states)   # (B, H, T, d)
        main_attn_output = main_attn_output.transpose(1, 2).reshape(batch_size, 1, sequence_length, hidden_size)

        predict_query_states = torch.stack(predict_query_states_list, 1)                    # (B, n, H, T, d)
        predict_key_states = torch.stack([torch.cat([main_key_states, key], 2) for key in predict_key_states_list], 1)
        predict_value_states = torch.stack(
            [torch.cat([main_value_states, value], 2) for value in predict_value_states_list], 1)
        predict_attn_weights = torch.einsum("bnhtc,bnhsc->bnhts", predict_query_states, predict_key_states)
        predict_attn_weights = predict_attn_weights + predict_attention_mask.unsqueeze(2)   # (B, n, H, T, 2T)
        predict_attn_probs = F.softmax(predict_attn_weights, dim=-1)
        predict_attn_output = torch.einsum("bnhts,bnhsc->bnhtc", predict_attn_probs, predict_value_states)
        if self.bug != "predict-merge-no-transpose":
            predict_attn_output = predict_attn_output.transpose(2, 3)                       # (B, n, T, H, d)
        predict_attn_output = predict_attn_output.reshape(batch_size, self.ngram, sequence_length, hidden_size)

        attn_output = torch.cat([main_attn_output, predict_attn_output], 1).view(batch_size, -1, hidden_size)
        return self.out_proj(attn_output)


class ProphetNetDecoder(nn.Module):
    def __init__(self, dim, heads, bug="", ngram=2, vocab=50, max_positions=32):
        super().__init__()
        self.ngram, self.bug = ngram, bug
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.position_embeddings = nn.Embedding(max_positions, dim)
        self.ngram_embeddings = nn.Embedding(ngram, dim)
        self.self_attn = ProphetNetNgramSelfAttention(dim, heads, ngram, bug)
        self.self_attn_layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids):                                                           # (B, T)
        batch_size, sequence_length = input_ids.shape
        position_ids = torch.arange(1, sequence_length + 1).unsqueeze(0).repeat(batch_size, 1)
        main_stream_pos_embed = self.position_embeddings(position_ids)
        predicting_stream_pos_embed = self.position_embeddings(position_ids + 1)
        hidden_states = self.word_embeddings(input_ids) + main_stream_pos_embed
        ngram_hidden_states = [
            (self.ngram_embeddings.weight[ngram - 1] + predicting_stream_pos_embed) for ngram in range(self.ngram)]
        dtype = hidden_states.dtype
        causal = torch.full((sequence_length, sequence_length), torch.finfo(dtype).min).triu(1)
        main_attention_mask = causal[None, None, :, :].expand(batch_size, 1, -1, -1)
        predict_bias = ngram_attention_bias(sequence_length, self.ngram, dtype, self.bug)
        predict_attention_mask = predict_bias[None].expand(batch_size, -1, -1, -1)     # (B, n, T, 2T)
        hidden_states = torch.cat([hidden_states] + ngram_hidden_states, 1)             # (B, (1+n)T, D)
        residual = hidden_states
        attn = self.self_attn(hidden_states, main_attention_mask, predict_attention_mask)
        return self.self_attn_layer_norm(residual + attn)


BUGS = ("stream-offset-sign", "predict-merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return ProphetNetDecoder(D, H, bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
