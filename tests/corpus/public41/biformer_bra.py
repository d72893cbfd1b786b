"""rayleizhu/BiFormer, ops/bra_legacy.py (``BiLevelRoutingAttention`` with ``TopkRouting``, ``KVGather``,
``QKVLinear``; ``param_routing=False``, ``diff_routing=False``, ``soft_routing=False``, ``kv_downsample_mode=
'identity'``, ``side_dwconv=3``), main: an NHWC map cut into ``n_win × n_win`` regions by ``rearrange(x, "n (j h)
(i w) c -> n (j i) h w c")``; ``qkv`` split into q and kv; region-level queries and keys by ``mean([2, 3])``;
the router ``(q_win * scale) @ k_win.transpose(-2, -1)`` and ``torch.topk(..., k=topk, dim=-1)`` with
``softmax`` weights (``mul_weight='none'``: the weights unused); ``KVGather``: ``torch.gather(kv.view(n, 1, p2,
w2, c_kv).expand(-1, p2, -1, -1, -1), dim=2, index=r_idx.view(n, p2, topk, 1, 1).expand(-1, -1, -1, w2, c_kv))``;
the gathered regions split into k and v, rearranged ``'n p2 k w2 (m c) -> (n p2) m c (k w2)'`` and ``'... ->
(n p2) m (k w2) c'``, q ``'n p2 w2 (m c) -> (n p2) m w2 c'``; ``(q_pix * scale) @ k_pix_sel``, softmax, ``@
v_pix_sel``; ``'(n j i) m (h w) c -> n (j h) (i w) (m c)'``; the local enhancement ``lepe`` (a depthwise conv
over v as an image) added; ``wo``.

Bugs: ``q-heads-interleaved``: q's heads cut ``'n p2 w2 (c m) -> (n p2) m w2 c'`` (interleaved channels) while k
and v take ``(m c)``: each query head meets another head's keys; ``regions-merged-i-j-swapped``: the output merged
``'(n i j) m (h w) c -> n (j h) (i w) (m c)'`` (the region grid read column-major: regions transposed on the
map)."""

import sys

import torch
from einops import rearrange
from torch import nn


class BiLevelRoutingAttention(nn.Module):
    def __init__(self, dim, num_heads=4, n_win=2, topk=2, bug=""):
        super().__init__()
        self.bug = bug
        self.dim = dim
        self.n_win = n_win
        self.num_heads = num_heads
        self.qk_dim = dim
        self.scale = (dim // num_heads) ** -0.5
        self.topk = topk
        self.lepe = nn.Conv2d(dim, dim, kernel_size=3, stride=1, padding=1, groups=dim)
        self.qkv = nn.Linear(dim, self.qk_dim + self.qk_dim + dim)
        self.wo = nn.Linear(dim, dim)
        self.attn_act = nn.Softmax(dim=-1)

    def route(self, query, key):
        attn_logit = (query * self.scale) @ key.transpose(-2, -1)
        topk_attn_logit, topk_index = torch.topk(attn_logit, k=self.topk, dim=-1)
        return torch.softmax(topk_attn_logit, dim=-1), topk_index

    def kv_gather(self, r_idx, kv):
        n, p2, w2, c_kv = kv.size()
        topk = r_idx.size(-1)
        return torch.gather(kv.view(n, 1, p2, w2, c_kv).expand(-1, p2, -1, -1, -1), dim=2,
                            index=r_idx.view(n, p2, topk, 1, 1).expand(-1, -1, -1, w2, c_kv))

    def forward(self, x):
        N, H, W, C = x.size()
        x = rearrange(x, "n (j h) (i w) c -> n (j i) h w c", j=self.n_win, i=self.n_win)
        q, kv = self.qkv(x).split([self.qk_dim, self.qk_dim + self.dim], dim=-1)
        q_pix = rearrange(q, "n p2 h w c -> n p2 (h w) c")
        kv_pix = rearrange(kv, "n p2 h w c -> n p2 (h w) c")
        q_win, k_win = q.mean([2, 3]), kv[..., 0:self.qk_dim].mean([2, 3])
        lepe = self.lepe(rearrange(kv[..., self.qk_dim:], "n (j i) h w c -> n c (j h) (i w)",
                                   j=self.n_win, i=self.n_win).contiguous())
        lepe = rearrange(lepe, "n c (j h) (i w) -> n (j h) (i w) c", j=self.n_win, i=self.n_win)
        r_weight, r_idx = self.route(q_win, k_win)
        kv_pix_sel = self.kv_gather(r_idx=r_idx, kv=kv_pix)
        k_pix_sel, v_pix_sel = kv_pix_sel.split([self.qk_dim, self.dim], dim=-1)
        k_pix_sel = rearrange(k_pix_sel, "n p2 k w2 (m c) -> (n p2) m c (k w2)", m=self.num_heads)
        v_pix_sel = rearrange(v_pix_sel, "n p2 k w2 (m c) -> (n p2) m (k w2) c", m=self.num_heads)
        q_split = "n p2 w2 (c m) -> (n p2) m w2 c" if self.bug == "q-heads-interleaved" else \
            "n p2 w2 (m c) -> (n p2) m w2 c"
        q_pix = rearrange(q_pix, q_split, m=self.num_heads)
        attn_weight = (q_pix * self.scale) @ k_pix_sel
        attn_weight = self.attn_act(attn_weight)
        out = attn_weight @ v_pix_sel
        merge = "(n i j) m (h w) c -> n (j h) (i w) (m c)" if self.bug == "regions-merged-i-j-swapped" else \
            "(n j i) m (h w) c -> n (j h) (i w) (m c)"
        out = rearrange(out, merge, j=self.n_win, i=self.n_win, h=H // self.n_win, w=W // self.n_win)
        out = out + lepe
        return self.wo(out)


BUGS = ("q-heads-interleaved", "regions-merged-i-j-swapped")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    model = BiLevelRoutingAttention(D, num_heads=H, n_win=2, topk=2, bug=bug).eval()
    return model, (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
