"""RUCAIBox/RecBole issue #1113 ("[🐛BUG] Gathering Wrong Indices in BERT4Rec", labelled bug; Sherry-XLL: "this is
indeed a bug and has been fixed in #1115"): recbole/model/sequential_recommender/bert4rec.py ``full_sort_predict``
appends the mask token at position ``item_seq_len`` of each right-padded sequence (``reconstruct_test_data``) and
then reads the encoder's output at ``item_seq_len - 1``, the last real item, instead of the mask token whose
hidden state BERT4Rec trained to predict the next item (pull request #1115: ``gather_indexes(seq_output,
item_seq_len)``; the reporter: "it leads to approximately right evaluation results").

The idiom (RecBole's BERT4Rec at #1115, its default two layers): item ids ``(B, L)`` right-padded with 0 and
their lengths; ``reconstruct_test_data`` (a zero column appended, ``item_seq[b][len_b] = mask_token``);
``item_embedding`` (``n_items + 1`` rows, the mask token last) plus ``position_embedding`` (``max_seq_length + 1``
rows), ``LayerNorm``; its own bidirectional ``get_attention_mask`` (``(item_seq > 0)`` unsqueezed ``(B, 1, 1, L)``,
``(1 - mask) * -10000``); RecBole's ``MultiHeadAttention`` (``transpose_for_scores``: ``view(*x.size()[:-1], H,
d)`` and ``permute(0, 2, 1, 3)``; ``matmul`` with ``key.transpose(-1, -2)`` over ``sqrt(d)`` plus the mask,
``Softmax(dim=-1)``, the context permuted back and ``view``\\ ed, ``dense``, residual ``LayerNorm``) and the
feed-forward, twice; ``gather_indexes`` (``output.gather(dim=1, index=gather_index.view(-1, 1, 1).expand(-1, -1,
D))``) and the scores against the item table without its mask row.

Bugs (argument): ``gather-last-item``: ``gather_indexes(seq_output, item_seq_len - 1)`` (RecBole before #1115);
``causal-mask``: the mask taken from SASRec's ``get_attention_mask`` (the key padding and'ed with the lower
triangle), which BERT4Rec's bidirectional encoder must not use."""

import math
import sys

import torch
from torch import nn

BUGS = ("gather-last-item", "causal-mask")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class MultiHeadAttention(nn.Module):
    def __init__(self, n_heads, hidden_size, layer_norm_eps=1e-12):
        super().__init__()
        self.num_attention_heads = n_heads
        self.attention_head_size = hidden_size // n_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(*new_x_shape)                                                      # (B, L, H, d)
        return x.permute(0, 2, 1, 3)                                                  # (B, H, L, d)

    def forward(self, input_tensor, attention_mask):                                  # (B, L, D), (B, 1, ?, L)
        query_layer = self.transpose_for_scores(self.query(input_tensor))
        key_layer = self.transpose_for_scores(self.key(input_tensor))
        value_layer = self.transpose_for_scores(self.value(input_tensor))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))    # (B, H, L, L)
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.Softmax(dim=-1)(attention_scores)
        context_layer = torch.matmul(attention_probs, value_layer)                   # (B, H, L, d)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()               # (B, L, H, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)                 # (B, L, D)
        hidden_states = self.dense(context_layer)
        return self.LayerNorm(hidden_states + input_tensor)


class TransformerLayer(nn.Module):
    def __init__(self, n_heads, hidden_size):
        super().__init__()
        self.multi_head_attention = MultiHeadAttention(n_heads, hidden_size)
        self.feed_forward = nn.Sequential(nn.Linear(hidden_size, 4 * hidden_size), nn.GELU(),
                                          nn.Linear(4 * hidden_size, hidden_size))
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.multi_head_attention(hidden_states, attention_mask)
        return self.LayerNorm(attention_output + self.feed_forward(attention_output))


class BERT4Rec(nn.Module):
    def __init__(self, n_items, max_seq_length, hidden_size, n_heads, n_layers=2, bug=""):
        super().__init__()
        self.n_items, self.mask_token, self.bug = n_items, n_items, bug
        self.item_embedding = nn.Embedding(n_items + 1, hidden_size, padding_idx=0)  # mask token add 1
        self.position_embedding = nn.Embedding(max_seq_length + 1, hidden_size)      # add mask_token at the last
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.trm_encoder = nn.ModuleList(TransformerLayer(n_heads, hidden_size) for _ in range(n_layers))

    def get_attention_mask(self, item_seq):
        attention_mask = (item_seq > 0).long()
        extended_attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)            # (B, 1, 1, L)
        if self.bug == "causal-mask":
            max_len = attention_mask.size(-1)
            subsequent_mask = torch.triu(torch.ones((1, max_len, max_len)), diagonal=1)
            subsequent_mask = (subsequent_mask == 0).unsqueeze(1).long()             # (1, 1, L, L)
            extended_attention_mask = extended_attention_mask * subsequent_mask       # (B, 1, L, L)
        extended_attention_mask = extended_attention_mask.to(dtype=next(self.parameters()).dtype)
        return (1.0 - extended_attention_mask) * -10000.0

    def reconstruct_test_data(self, item_seq, item_seq_len):
        padding = torch.zeros(item_seq.size(0), dtype=torch.long)                     # (B,)
        item_seq = torch.cat((item_seq, padding.unsqueeze(-1)), dim=-1)              # (B, L+1)
        for batch_id, last_position in enumerate(item_seq_len):
            item_seq[batch_id][last_position] = self.mask_token
        return item_seq

    def forward(self, item_seq):
        position_ids = torch.arange(item_seq.size(1), dtype=torch.long)
        position_ids = position_ids.unsqueeze(0).expand_as(item_seq)                 # (B, L+1)
        input_emb = self.item_embedding(item_seq) + self.position_embedding(position_ids)
        input_emb = self.LayerNorm(input_emb)
        extended_attention_mask = self.get_attention_mask(item_seq)
        for layer_module in self.trm_encoder:
            input_emb = layer_module(input_emb, extended_attention_mask)
        return input_emb                                                             # (B, L+1, D)

    def gather_indexes(self, output, gather_index):
        gather_index = gather_index.view(-1, 1, 1).expand(-1, -1, output.shape[-1])  # (B, 1, D)
        output_tensor = output.gather(dim=1, index=gather_index)
        return output_tensor.squeeze(1)                                               # (B, D)

    def full_sort_predict(self, item_seq, item_seq_len):
        item_seq = self.reconstruct_test_data(item_seq, item_seq_len)
        seq_output = self.forward(item_seq)
        if self.bug == "gather-last-item":
            seq_output = self.gather_indexes(seq_output, item_seq_len - 1)
        else:
            seq_output = self.gather_indexes(seq_output, item_seq_len)
        test_items_emb = self.item_embedding.weight[:self.n_items]                   # delete masked token
        return torch.matmul(seq_output, test_items_emb.transpose(0, 1))             # (B, n_items)


class Predict(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, item_seq, item_seq_len):
        return self.model.full_sort_predict(item_seq, item_seq_len)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    n_items = 50
    item_seq_len = torch.randint(1, T + 1, (B,))
    item_seq = torch.randint(1, n_items, (B, T))
    item_seq = item_seq * (torch.arange(T)[None, :] < item_seq_len[:, None])        # right-padded with 0
    return Predict(BERT4Rec(n_items, T, D, H, bug=bug)).eval(), (item_seq, item_seq_len)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
