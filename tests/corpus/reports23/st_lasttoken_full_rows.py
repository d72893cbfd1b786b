"""huggingface/sentence-transformers pull request #2111 ("Fix indexing of lasttoken pooling for longest
sequence", merged; ssharpe42: "Sequences that span the entire seq length of the batch will have attention mask
of all 1's. The current logic results in retrieving the **first** token embedding instead of the last since
``torch.min(torch.tensor([1,1,1 ... , 1]))`` will be 0"): ``Pooling``'s last-token mode (SGPT) took the index
of the last real token as ``argmin(attention_mask, 1) - 1``, clamped at 0; for the longest row of a
right-padded batch the mask has no 0, ``argmin`` is 0, and the sentence embedding was that row's first token.
The fix reads ``torch.min`` and uses ``seq_len`` where the row has no padding.

The idiom: a GPT-style causal encoder (``c_attn`` split in three, heads by ``view``/``transpose``,
``scaled_dot_product_attention`` with the causal mask and the padding mask combined), then the pooling: the
index ``[bs]`` repeated to ``[bs, 1, hidden_dim]`` and ``torch.gather`` along the sequence axis of the
masked token embeddings. The first row spans the batch; the second has two pads.

Bug (index): ``argmin-first-token``: ``argmin(attention_mask, 1) - 1`` clamped at 0."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("argmin-first-token",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x, attention_mask):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = causal[None, None] & attention_mask[:, None, None, :].bool()
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class LastTokenEncoder(nn.Module):
    def __init__(self, vocab, n_embd, n_head, max_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(max_len, n_embd)
        self.ln_1, self.ln_f = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)

    def pool(self, token_embeddings, attention_mask):
        bs, seq_len, hidden_dim = token_embeddings.shape
        if self.bug == "argmin-first-token":
            gather_indices = torch.argmin(attention_mask, 1, keepdim=False) - 1
            gather_indices = torch.clamp(gather_indices, min=0)
        else:
            values, indices = torch.min(attention_mask, 1, keepdim=False)
            gather_indices = torch.where(values == 0, indices, seq_len) - 1
        gather_indices = gather_indices.unsqueeze(-1).repeat(1, hidden_dim)
        gather_indices = gather_indices.unsqueeze(1)                                    # (bs, 1, hidden_dim)
        input_mask_expanded = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
        return torch.gather(token_embeddings * input_mask_expanded, 1, gather_indices).squeeze(dim=1)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1), dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        x = x + self.attn(self.ln_1(x), attention_mask)
        return self.pool(self.ln_f(x), attention_mask)                                  # (B, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[-1, -2:] = 0                                                         # right padding
    input_ids = torch.randint(1, 50, (B, T)).masked_fill(attention_mask == 0, 0)
    return LastTokenEncoder(50, D, H, bug=bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
