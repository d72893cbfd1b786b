"""NVIDIA/TransformerEngine pull request #536 ("[PyTorch] Fix bug in micro batched inference with rotary
embeddings"; the same bug in NVIDIA/Megatron-LM pull request #412): at inference the attention told the first
step (the prompt, rotated with ``q_pos_emb[:sequence_end]``) from the later ones (one new token, rotated with
``q_pos_emb[sequence_end - 1 : sequence_end]``) by whether its layer had allocated its key/value memory yet. When
the batch is split into micro-batches (pipelined inference), only the first micro-batch allocates it: every other
micro-batch's prompt is taken for a decoding step, and all of its queries are rotated for the last position;
"pytorch never complains as it is happy to broadcast the tensor ``q_pos_emb[sequence_end - 1 : sequence_end]``
with dimension size 1". The fix slices ``q_pos_emb[sequence_start:sequence_end]``.

The idiom (Megatron-LM's ``ParallelAttention`` as TransformerEngine's ``MultiheadAttention`` took it over, one
tensor-parallel rank): sequence-first ``[sq, b, h]`` hidden states, ``query_key_value`` viewed ``[sq, b, np, 3 *
hn]`` and split, ``InferenceParams`` with ``key_value_memory_dict`` (``[max_s, max_b, np, hn]`` buffers per layer),
``sequence_len_offset`` and ``batch_size_offset``, the keys and values written to
``memory[sequence_start:sequence_end, batch_start:batch_end]`` and read back ``[:sequence_end,
batch_start:batch_end]``, rotary ``[s, 1, 1, hn]`` tables, the core attention on ``[b * np, sq, hn]`` (``bmm``,
causal mask, softmax, ``bmm``), ``[sq, b, np * hn]`` and ``dense``. The model runs the prompt of a batch of B in two
micro-batches of B / 2 and stacks their outputs.

Bugs (argument): ``last-position-query``: the reported ``q_pos_emb[sequence_end - 1:sequence_end]`` whenever the
layer's memory exists; ``cache-rows-from-zero``: the keys and values read back from rows ``[:b]`` of the memory
instead of ``[batch_start:batch_end]`` (the batch offset left out of the read: the second micro-batch attends to
the first one's tokens)."""

import math
import sys

import torch
from torch import nn

BUGS = ("last-position-query", "cache-rows-from-zero")
TWINS = ()
DIMS = ("B=6 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class InferenceParams:
    def __init__(self, max_batch_size, max_sequence_length):
        self.max_sequence_length, self.max_batch_size = max_sequence_length, max_batch_size
        self.sequence_len_offset, self.batch_size_offset = 0, 0
        self.key_value_memory_dict = {}


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, max_seq_len):
        seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", seq, self.inv_freq)                          # (max_s, hn/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                      # (max_s, hn)
        return emb[:, None, None, :]                                                 # (max_s, 1, 1, hn)


def _rotate_half(x):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs):
    return (t * freqs.cos()) + (_rotate_half(t) * freqs.sin())


class ParallelAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, layer_number=1, bug=""):
        super().__init__()
        self.np, self.hn = num_attention_heads, hidden_size // num_attention_heads
        self.layer_number, self.bug = layer_number, bug
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, rotary_pos_emb, inference_params):
        sq, b, _ = hidden_states.shape
        mixed_x_layer = self.query_key_value(hidden_states)                          # [sq, b, 3 * h]
        mixed_x_layer = mixed_x_layer.view(sq, b, self.np, 3 * self.hn)              # [sq, b, np, 3 * hn]
        query_layer, key_layer, value_layer = torch.split(mixed_x_layer, self.hn, dim=3)   # [sq, b, np, hn]

        is_first_step = False
        if self.layer_number not in inference_params.key_value_memory_dict:
            shape = (inference_params.max_sequence_length, inference_params.max_batch_size, self.np, self.hn)
            inference_params.key_value_memory_dict[self.layer_number] = (torch.zeros(shape), torch.zeros(shape))
            is_first_step = True
        inference_key_memory, inference_value_memory = inference_params.key_value_memory_dict[self.layer_number]
        batch_start = inference_params.batch_size_offset
        batch_end = batch_start + key_layer.size(1)
        sequence_start = inference_params.sequence_len_offset
        sequence_end = sequence_start + key_layer.size(0)
        inference_key_memory[sequence_start:sequence_end, batch_start:batch_end, ...] = key_layer
        inference_value_memory[sequence_start:sequence_end, batch_start:batch_end, ...] = value_layer
        if self.bug == "cache-rows-from-zero":
            batch_start, batch_end = 0, b
        key_layer = inference_key_memory[:sequence_end, batch_start:batch_end, ...]      # [sk, b, np, hn]
        value_layer = inference_value_memory[:sequence_end, batch_start:batch_end, ...]  # [sk, b, np, hn]

        q_pos_emb, k_pos_emb = rotary_pos_emb, rotary_pos_emb
        if self.bug == "last-position-query" and not is_first_step:
            q_pos_emb = q_pos_emb[sequence_end - 1:sequence_end]                     # [1, 1, 1, hn]
        else:
            q_pos_emb = q_pos_emb[sequence_start:sequence_end]                       # [sq, 1, 1, hn]
        k_pos_emb = k_pos_emb[:sequence_end]                                         # [sk, 1, 1, hn]
        query_layer = apply_rotary_pos_emb(query_layer, q_pos_emb)
        key_layer = apply_rotary_pos_emb(key_layer, k_pos_emb)

        sk = key_layer.size(0)
        query_layer = query_layer.reshape(sq, b * self.np, self.hn).transpose(0, 1)      # [b * np, sq, hn]
        key_layer = key_layer.reshape(sk, b * self.np, self.hn).transpose(0, 1)          # [b * np, sk, hn]
        value_layer = value_layer.reshape(sk, b * self.np, self.hn).transpose(0, 1)      # [b * np, sk, hn]
        scores = torch.bmm(query_layer, key_layer.transpose(1, 2)) / math.sqrt(self.hn)  # [b * np, sq, sk]
        scores = scores.view(b, self.np, sq, sk)                                         # [b, np, sq, sk]
        attention_mask = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq)
        scores = scores.masked_fill(~attention_mask, -10000.0)
        probs = torch.softmax(scores, dim=-1)
        context = torch.bmm(probs.view(b * self.np, sq, sk), value_layer)                # [b * np, sq, hn]
        context = context.view(b, self.np, sq, self.hn).permute(2, 0, 1, 3)             # [sq, b, np, hn]
        context = context.reshape(sq, b, self.np * self.hn)                              # [sq, b, h]
        return self.dense(context)


class MicroBatchedPrompt(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, bug=""):
        super().__init__()
        self.rotary_pos_emb = RotaryEmbedding(hidden_size // num_attention_heads)
        self.self_attention = ParallelAttention(hidden_size, num_attention_heads, bug=bug)

    def forward(self, tokens):                                                       # [s, B, h]
        s, batch, _ = tokens.shape
        micro_batch_size = batch // 2
        inference_params = InferenceParams(batch, s + 4)
        rotary_pos_emb = self.rotary_pos_emb(inference_params.max_sequence_length)
        outputs = []
        for start in range(0, batch, micro_batch_size):
            inference_params.batch_size_offset = start
            micro_batch = tokens[:, start:start + micro_batch_size]                  # [s, B/2, h]
            outputs.append(self.self_attention(micro_batch, rotary_pos_emb, inference_params))
        inference_params.sequence_len_offset += s
        return torch.cat(outputs, dim=1)                                             # [s, B, h]


def build(bug="", B=6, T=5, D=32, H=4):
    torch.manual_seed(0)
    return MicroBatchedPrompt(D, H, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
