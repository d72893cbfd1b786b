"""lucidrains/local-attention, local_attention/local_attention.py (``LocalAttention.forward``, ``look_around``,
``pad_to_multiple``, ``max_neg_value``) under local_attention/transformer.py's ``LocalMHA`` (``to_qkv`` chunked in
three, ``rearrange(t, 'b n (h d) -> b h n d')``, ``autopad=True``, ``exact_windowsize`` on by default): causal
windowed attention. The heads are packed into the batch (``pack([t], '* n d')``), the sequence padded to a multiple
of ``window_size``, ``'b (w n) d -> b w n d'`` into windows; each window's keys and values are the window itself
and ``look_backward`` windows before it (``look_around``: ``F.pad(x, (*dims, backward, forward), value=-1)``, then
the shifted slices ``padded_x[:, ind:(ind + t)]`` concatenated on dim 2). The token positions ``b_t`` go through
the same ``look_around``, so ``bq_t < bq_k`` is the causal mask, ``bq_t > bq_k + window_size * look_backward`` the
exact-window mask and ``bq_k == pad_value`` the padding; ``einsum('b h i e, b h j e -> b h i j')`` (the ``h`` of
that einsum is the window), ``softmax(dim=-1)``, back ``'b w n d -> b (w n) d'``, the autopad cut off, heads
unpacked and merged ``'b h n d -> b n (h d)'``. (The rotary embedding is left out: ``LocalAttention`` without
``dim``.)

Bugs: ``look-around-pad-after``: ``F.pad(x, (*dims, forward, backward))`` (the two pad amounts swapped: the slot
of the "previous" window holds the next one, hidden again by the causal mask, so every query sees its own window
only and the look-back is silently lost); ``windows-strided``: q, k, v split ``'b (n w) d -> b w n d'`` while the
positions stay ``'(w n)'`` (each "window" a stride of tokens; the causal mask, built from the positions, no longer
belongs to the tokens it masks, so later tokens leak into earlier ones); ``exact-window-off-by-one``: the exact
window ``bq_t >= bq_k + max_causal_window_size`` (the oldest key of the window hidden: ``window_size *
look_backward`` keys instead of one more).

Twin: ``rearrange-unpack``: the heads unpacked with ``rearrange(out, '(b h) n d -> b h n d', b=...)`` instead of
einops' ``unpack`` (the same tensor)."""

import math
import sys

import torch
import torch.nn.functional as F
from einops import pack, rearrange, unpack
from torch import einsum, nn


def max_neg_value(tensor):
    return -torch.finfo(tensor.dtype).max


def pad_to_multiple(tensor, multiple, dim=-1, value=0):
    seqlen = tensor.shape[dim]
    m = seqlen / multiple
    if m.is_integer():
        return False, tensor
    remainder = math.ceil(m) * multiple - seqlen
    pad_offset = (0,) * (-1 - dim) * 2
    return True, F.pad(tensor, (*pad_offset, 0, remainder), value=value)


def look_around(x, backward=1, forward=0, pad_value=-1, dim=2, bug=""):
    t = x.shape[1]
    dims = (len(x.shape) - dim) * (0, 0)
    if bug == "look-around-pad-after":
        padded_x = F.pad(x, (*dims, forward, backward), value=pad_value)
    else:
        padded_x = F.pad(x, (*dims, backward, forward), value=pad_value)             # (b, w + 1, n, ...)
    tensors = [padded_x[:, ind:(ind + t), ...] for ind in range(forward + backward + 1)]
    return torch.cat(tensors, dim=dim)                                              # (b, w, 2·n, ...)


class LocalAttention(nn.Module):
    def __init__(self, window_size, look_backward=1, look_forward=0, bug=""):
        super().__init__()
        self.window_size, self.bug = window_size, bug
        self.look_backward, self.look_forward = look_backward, look_forward

    def forward(self, q, k, v):
        (q, packed_shape), (k, _), (v, _) = map(lambda t: pack([t], '* n d'), (q, k, v))   # (b·h, n, d)
        orig_seq_len = q.shape[1]
        (needed_pad, q), (_, k), (_, v) = map(lambda t: pad_to_multiple(t, self.window_size, dim=-2), (q, k, v))
        b, n, dim_head = q.shape
        scale = dim_head ** -0.5
        windows = n // self.window_size
        seq = torch.arange(n)
        b_t = rearrange(seq, '(w n) -> 1 w n', w=windows, n=self.window_size)         # (1, w, n)
        split = 'b (n w) d -> b w n d' if self.bug == "windows-strided" else 'b (w n) d -> b w n d'
        bq, bk, bv = map(lambda t: rearrange(t, split, w=windows), (q, k, v))        # (b·h, w, n, d)
        bq = bq * scale
        look_around_kwargs = dict(backward=self.look_backward, forward=self.look_forward, pad_value=-1, bug=self.bug)
        bk = look_around(bk, **look_around_kwargs)                                   # (b·h, w, 2·n, d)
        bv = look_around(bv, **look_around_kwargs)                                   # (b·h, w, 2·n, d)
        bq_t = b_t
        bq_k = look_around(b_t, **look_around_kwargs)                                # (1, w, 2·n)
        bq_t = rearrange(bq_t, '... i -> ... i 1')
        bq_k = rearrange(bq_k, '... j -> ... 1 j')
        pad_mask = bq_k == -1
        sim = einsum('b h i e, b h j e -> b h i j', bq, bk)                          # (b·h, w, n, 2·n)
        mask_value = max_neg_value(sim)
        causal_mask = bq_t < bq_k
        max_causal_window_size = self.window_size * self.look_backward
        if self.bug == "exact-window-off-by-one":
            causal_mask = causal_mask | (bq_t >= (bq_k + max_causal_window_size))
        else:
            causal_mask = causal_mask | (bq_t > (bq_k + max_causal_window_size))
        sim = sim.masked_fill(causal_mask, mask_value)
        sim = sim.masked_fill(pad_mask, mask_value)
        attn = sim.softmax(dim=-1)
        out = einsum('b h i j, b h j e -> b h i e', attn, bv)                        # (b·h, w, n, d)
        out = rearrange(out, 'b w n d -> b (w n) d')                                 # (b·h, n, d)
        if needed_pad:
            out = out[:, :orig_seq_len, :]
        if self.bug == "rearrange-unpack":
            return rearrange(out, '(b h) n d -> b h n d', b=packed_shape[0][0])      # (b, h, n, d)
        out, *_ = unpack(out, packed_shape, '* n d')                                  # (b, h, n, d)
        return out


class LocalMHA(nn.Module):
    def __init__(self, dim, window_size, heads, bug=""):
        super().__init__()
        dim_head = dim // heads
        inner_dim = dim_head * heads
        self.heads = heads
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.attn_fn = LocalAttention(window_size, look_backward=1, look_forward=0, bug=bug)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (q, k, v))   # (b, h, n, d)
        out = self.attn_fn(q, k, v)                                                  # (b, h, n, d)
        out = rearrange(out, 'b h n d -> b n (h d)')                                 # (b, n, h·d)
        return self.to_out(out)


BUGS = ("look-around-pad-after", "windows-strided", "exact-window-off-by-one")
TWINS = ("rearrange-unpack",)
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """A causal local-attention layer with windows of 2 tokens, each looking one window back; ``T`` padded up."""
    torch.manual_seed(0)
    return LocalMHA(D, window_size=2, heads=H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
