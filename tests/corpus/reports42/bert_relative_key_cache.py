"""huggingface/transformers pull request #20203 ("update relative positional embedding", merged; first reported in
issue #19045): ``BertSelfAttention`` with ``position_embedding_type="relative_key"`` built the query positions as
``arange(query_length)`` in every call, so a decoder run with ``use_cache=True`` gave the one new query position 0
while its key sat at ``key_length - 1`` behind the cached ones: the relative distances to every cached key got the
wrong sign and size, and the cached logits differed from the uncached ones (the PR's script). The fix:
``position_ids_l = torch.tensor(key_length - 1).view(-1, 1)`` when the cache is used.

The idiom (``BertSelfAttention`` of the time, a ``BertLMHeadModel`` decoder): ``query``/``key``/``value``
Linears, ``transpose_for_scores`` (``view(x.size()[:-1] + (H, d)).permute(0, 2, 1, 3)``), the cached keys and
values joined on dim 2, ``matmul`` of the query and the transposed key, ``distance = position_ids_l -
position_ids_r`` read from ``distance_embedding`` at ``distance + max_position_embeddings - 1``, ``einsum("bhld,
lrd->bhlr")`` added to the scores, ``/ sqrt(d)``, the decoder's extended causal mask, ``softmax(-1)``, the merge
``permute(0, 2, 1, 3)`` / ``view``, ``BertSelfOutput`` (dense, LayerNorm of the residual). Word and token-type
embeddings only (no absolute positions with ``relative_key``). A prefill of T tokens, then one cached step.

Bug (positions): ``query-at-zero``: ``position_ids_l = arange(query_length)`` in the cached step."""

import math
import sys

import torch
from torch import nn

BUGS = ("query-at-zero",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class BertSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, max_position_embeddings=16, bug=""):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = num_attention_heads, hidden_size // num_attention_heads
        self.all_head_size, self.max_position_embeddings, self.bug = hidden_size, max_position_embeddings, bug
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.distance_embedding = nn.Embedding(2 * max_position_embeddings - 1, self.attention_head_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)                                  # (B, H, L, d)

    def forward(self, hidden_states, attention_mask, past_key_value=None):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))                  # (B, H, L, d)
        value_layer = self.transpose_for_scores(self.value(hidden_states))              # (B, H, L, d)
        if past_key_value is not None:
            key_layer = torch.cat([past_key_value[0], key_layer], dim=2)                # (B, H, P+L, d)
            value_layer = torch.cat([past_key_value[1], value_layer], dim=2)
        use_cache = past_key_value is not None
        past_key_value = (key_layer, value_layer)
        query_layer = self.transpose_for_scores(mixed_query_layer)                      # (B, H, L, d)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))       # (B, H, L, K)
        query_length, key_length = query_layer.shape[2], key_layer.shape[2]
        if use_cache and self.bug != "query-at-zero":
            position_ids_l = torch.tensor(key_length - 1, dtype=torch.long).view(-1, 1)
        else:
            position_ids_l = torch.arange(query_length, dtype=torch.long).view(-1, 1)
        position_ids_r = torch.arange(key_length, dtype=torch.long).view(1, -1)
        distance = position_ids_l - position_ids_r                                      # (L, K)
        positional_embedding = self.distance_embedding(distance + self.max_position_embeddings - 1)  # (L, K, d)
        relative_position_scores = torch.einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
        attention_scores = attention_scores + relative_position_scores
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)               # (B, H, L, K)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()   # (B, L, H, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape), past_key_value              # (B, L, D)


class BertLayer(nn.Module):
    def __init__(self, hidden_size, heads, bug=""):
        super().__init__()
        self.self = BertSelfAttention(hidden_size, heads, bug=bug)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)

    def forward(self, hidden_states, attention_mask, past_key_value=None):
        context, present = self.self(hidden_states, attention_mask, past_key_value)
        return self.LayerNorm(self.dense(context) + hidden_states), present


class BertDecoder(nn.Module):
    def __init__(self, vocab, hidden_size, heads, bug=""):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden_size)
        self.token_type_embeddings = nn.Embedding(2, hidden_size)
        self.emb_norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.layer = BertLayer(hidden_size, heads, bug)

    def embed(self, input_ids):
        return self.emb_norm(self.word_embeddings(input_ids) + self.token_type_embeddings(torch.zeros_like(input_ids)))

    def forward(self, input_ids, next_ids):                                             # (B, T), (B, 1)
        batch_size, seq_length = input_ids.shape
        seq_ids = torch.arange(seq_length)
        causal_mask = seq_ids[None, None, :].repeat(batch_size, seq_length, 1) <= seq_ids[None, :, None]
        extended = (1.0 - causal_mask[:, None, :, :].float()) * torch.finfo(torch.float32).min   # (B, 1, T, T)
        _, past = self.layer(self.embed(input_ids), extended)
        step_mask = torch.zeros(batch_size, 1, 1, seq_length + 1)                       # (B, 1, 1, T+1)
        out, _ = self.layer(self.embed(next_ids), step_mask, past)
        return out                                                                      # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return BertDecoder(50, D, H, bug).eval(), (torch.randint(0, 50, (B, T)), torch.randint(0, 50, (B, 1)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
