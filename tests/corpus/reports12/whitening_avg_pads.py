"""autoliuweijie/BERT-whitening-pytorch issue #13 ("should the attention mask be used when averaging to get the
sentence embedding"; confirmed by a comment measuring STS scores: "Padding tokens indeed have an impact on
performance and should be removed"): the ``first_last_avg`` pooling took
``(hidden_states[-1] + hidden_states[1]).mean(dim=1)`` over the *padded* batch, so the padding tokens of the
shorter sentences entered their embedding (which then changed with the batch's longest sentence), although the
encoder itself masked them. The report's fix: ``(hidden * att_mask.unsqueeze(-1)).sum(1) /
att_mask.sum(-1).unsqueeze(-1)``.

The idiom: a BERT encoder called with ``output_hidden_states`` (the embeddings, then each layer's output),
``BertSelfAttention`` with the extended mask ``(1.0 - mask[:, None, None, :]) * -10000.0`` added to the
scores, then the repository's pooling of the first layer's and the last layer's states.

Bug (argument): ``avg-over-pads``: ``.mean(dim=1)`` without the attention mask."""

import math
import sys

import torch
from torch import nn

BUGS = ("avg-over-pads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, hidden // heads
        self.all_head_size = hidden
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)                          # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        probs = nn.functional.softmax(scores + attention_mask, dim=-1)          # (B, H, T, T)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.all_head_size,))        # (B, T, D)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.dense, self.norm = nn.Linear(hidden, hidden), nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x, extended_mask):
        x = self.norm(x + self.dense(self.attention(x, extended_mask)))
        return self.norm2(x + self.ffn(x))


class WhiteningEncoder(nn.Module):
    def __init__(self, hidden, heads, layers=2, vocab=50, bug=""):
        super().__init__()
        self.bug = bug
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.emb_norm = nn.LayerNorm(hidden)
        self.layer = nn.ModuleList(BertLayer(hidden, heads) for _ in range(layers))

    def forward(self, input_ids, att_mask):                                     # (B, T), (B, T)
        extended = (1.0 - att_mask[:, None, None, :].float()) * -10000.0        # (B, 1, 1, T)
        hidden_states = [self.emb_norm(self.word_embeddings(input_ids))]
        for layer in self.layer:
            hidden_states.append(layer(hidden_states[-1], extended))
        hidden = (hidden_states[-1] + hidden_states[1]) / 2                      # first_last_avg
        if self.bug == "avg-over-pads":
            return hidden.mean(dim=1)                                           # [pool] (B, D)
        return (hidden * att_mask.unsqueeze(-1)).sum(1) / att_mask.sum(-1).unsqueeze(-1)   # [pool] (B, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(1, 50, (B, T))
    att_mask = torch.ones(B, T, dtype=torch.long)
    att_mask[1:, T - 2:] = 0                                                    # the shorter sentences padded
    input_ids[att_mask == 0] = 0
    return WhiteningEncoder(D, H, bug=bug).eval(), (input_ids, att_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
