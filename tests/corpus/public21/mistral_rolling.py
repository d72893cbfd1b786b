"""mistralai/mistral-inference, the first release's ``one_file_ref.py`` (v0.0.1, ``Attention``, ``Transformer``):
``wq``/``wk``/``wv`` with grouped key/value heads viewed ``(B, T, H, head_dim)``; a rolling-buffer cache of
``sliding_window`` slots written at ``positions % sliding_window`` (``cache_k[:bsz, scatter_pos] = xk[:, -W:]``);
the prefill reads the fresh keys under the mask ``torch.full((T, T), 1).tril(0).triu(-sliding_window)``, log'd
(``-inf`` off the band); a decode step writes its key into slot ``pos % W`` and reads the whole buffer;
``repeat_interleave`` of the key/value heads; ``softmax(scores.float(), dim=-1)``; ``wo``. (Rotary left out.)

Bugs (argument): ``window-band-upper``: the band built ``tril(sliding_window).triu(0)`` (the two calls' roles
swapped, a natural slip of the banded mask: each token reads the next ``W`` tokens); ``decode-softmax-over-queries``:
the decode step's ``softmax(dim=-2)`` (over the one query: every weight 1, a slip of copying the prefill's
``(B, H, T, S)`` code with the axes moved)."""

import sys

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, sliding_window, max_batch, bug=""):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.bug = n_heads, n_kv_heads, bug
        self.head_dim = dim // n_heads
        self.repeats = n_heads // n_kv_heads
        self.sliding_window = sliding_window
        self.scale = self.head_dim**-0.5
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.cache_k = torch.zeros(max_batch, sliding_window, n_kv_heads, self.head_dim)
        self.cache_v = torch.zeros(max_batch, sliding_window, n_kv_heads, self.head_dim)

    def forward(self, x, positions, mask):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        scatter_pos = (positions[-self.sliding_window:] % self.sliding_window)[None, :, None, None]
        scatter_pos = scatter_pos.repeat(bsz, 1, self.n_kv_heads, self.head_dim)
        self.cache_k[:bsz].scatter_(1, scatter_pos, xk[:, -self.sliding_window:])
        self.cache_v[:bsz].scatter_(1, scatter_pos, xv[:, -self.sliding_window:])
        if positions.shape[0] > 1:                                              # prefill: the fresh keys
            key, value = xk, xv
        else:                                                                   # decode: the whole buffer
            key, value = self.cache_k[:bsz], self.cache_v[:bsz]
        key = torch.repeat_interleave(key, repeats=self.repeats, dim=2)
        value = torch.repeat_interleave(value, repeats=self.repeats, dim=2)
        xq, key, value = xq.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
        scores = torch.matmul(xq, key.transpose(2, 3)) * self.scale             # (B, H, T, S)
        if mask is not None:
            scores = scores + mask[None, None, ...]
        axis = -2 if self.bug == "decode-softmax-over-queries" and mask is None else -1
        scores = nn.functional.softmax(scores.float(), dim=axis).type_as(xq)
        output = torch.matmul(scores, value)                                    # (B, H, T, head_dim)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class Transformer(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, sliding_window, max_batch, bug=""):
        super().__init__()
        self.attention = Attention(dim, n_heads, n_kv_heads, sliding_window, max_batch, bug)
        self.sliding_window, self.bug = sliding_window, bug

    def forward(self, x, x_next):
        seqlen = x.shape[1]
        positions = torch.arange(0, seqlen)
        tensor = torch.full((seqlen, seqlen), fill_value=1, dtype=x.dtype)
        if self.bug == "window-band-upper":
            mask = torch.log(torch.tril(tensor, diagonal=self.sliding_window).triu(0))
        else:
            mask = torch.log(torch.tril(tensor, diagonal=0).triu(-self.sliding_window))
        h = self.attention(x, positions, mask)
        h_next = self.attention(x_next, torch.arange(seqlen, seqlen + 1), None)
        return h, h_next


BUGS = ("window-band-upper", "decode-softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2, W=4):
    torch.manual_seed(0)
    model = Transformer(D, H, H_kv, W, B, bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
