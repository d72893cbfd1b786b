"""huggingface/pytorch-image-models pull request #2388 ("Fix MQA V2", merged; commit "Fix MQA V2 scale and out
shape"): ``timm/layers/attention2d.py``, ``MultiQueryAttentionV2.forward`` (MobileNetV4's multi-query attention
written with einsums only, "removing multiple unnecessary tensor transpose by re-arranging indices"). The PR: "It
does not scale ``q @ k``, the output transpose was missing, the output reshape used the input ``dim`` instead of
the ``output_dim``". The released code flattened the NCHW map token-major (``t.reshape(s[0], s[1],
-1).transpose(1, 2)``, ``[b, n, d]``), projected the heads out with ``einsum('bnhv,dhv->bnd', o, out_proj)`` and
returned ``result.reshape(s)``: the ``[b, n, d]`` tokens read back as ``[b, d, h, w]`` channels-first, so output
channel c of pixel p holds feature (c * n + p) % d of token (c * n + p) // d. The fix writes the projection
``'bnhv,dhv->bdn'`` (channels first) and reshapes to ``(b, -1, h, w)``; it also multiplies the scores by
``self.scale = key_dim ** -0.5``.

timm's idiom: ``query_proj [num_heads, key_dim, dim]``, one shared ``key_proj [dim, key_dim]`` and
``value_proj [dim, value_dim]``, ``out_proj [dim_out, num_heads, value_dim]``, ``einsum('bnd,hkd->bnhk')``,
``einsum('bmd,dk->bmk')``, ``einsum('bnhk,bmk->bnhm')``, ``softmax(dim=-1)``, ``einsum('bnhm,bmv->bnhv')``; the
block around it as MobileNetV4's ``MobileAttention`` (``BatchNorm2d`` norm, the attention, a residual). A 2x3 map
(Hp = 2, Wp = 3, n = m = 6 tokens), D = 32 channels, 4 heads of key_dim = value_dim = 8.

Bugs: ``out-token-major`` (the reported projection ``'bnhv,dhv->bnd'`` and ``reshape(s)``, the scale fixed);
``no-scale`` (the reported unscaled scores, the output fixed)."""

import sys

import torch
from torch import nn

BUGS = ("out-token-major", "no-scale")
TWINS = ()
DIMS = ("B=2 Hp=2 Wp=3 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 Hp=2 Wp=2 D=32 H=4"}


class MultiQueryAttentionV2(nn.Module):
    def __init__(self, dim, dim_out=None, num_heads=8, key_dim=64, value_dim=64, bug=""):
        super().__init__()
        dim_out = dim_out or dim
        self.num_heads, self.key_dim, self.value_dim, self.bug = num_heads, key_dim, value_dim, bug
        self.scale = key_dim ** -0.5
        self.query_proj = nn.Parameter(torch.randn([self.num_heads, self.key_dim, dim]) * dim ** -0.5)
        self.key_proj = nn.Parameter(torch.randn([dim, self.key_dim]) * dim ** -0.5)
        self.value_proj = nn.Parameter(torch.randn([dim, self.value_dim]) * dim ** -0.5)
        self.out_proj = nn.Parameter(torch.randn([dim_out, self.num_heads, self.value_dim]) * dim ** -0.5)

    def _reshape_input(self, t):
        s = t.shape
        return t.reshape(s[0], s[1], -1).transpose(1, 2)                                 # [b, h*w, c]

    def forward(self, x, m=None):
        b, _, h, w = x.shape
        s = x.shape
        m = m if m is not None else x
        reshaped_x = self._reshape_input(x)
        reshaped_m = self._reshape_input(m)
        q = torch.einsum('bnd,hkd->bnhk', reshaped_x, self.query_proj)                   # [b, n, heads, key_dim]
        k = torch.einsum('bmd,dk->bmk', reshaped_m, self.key_proj)                       # [b, m, key_dim]
        attn = torch.einsum('bnhk,bmk->bnhm', q, k)                                      # [b, n, heads, m]
        if self.bug != "no-scale":
            attn = attn * self.scale
        attn = attn.softmax(dim=-1)
        v = torch.einsum('bmd,dv->bmv', reshaped_m, self.value_proj)                     # [b, m, value_dim]
        o = torch.einsum('bnhm,bmv->bnhv', attn, v)                                      # [b, n, heads, value_dim]
        if self.bug == "out-token-major":
            result = torch.einsum('bnhv,dhv->bnd', o, self.out_proj)                     # [b, n, c]
            return result.reshape(s)
        result = torch.einsum('bnhv,dhv->bdn', o, self.out_proj)                         # [b, c, n]
        return result.reshape(b, -1, h, w)                                               # [b, c, h, w]


class MobileAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.norm = nn.BatchNorm2d(dim)
        self.attn = MultiQueryAttentionV2(dim, num_heads=num_heads, key_dim=dim // num_heads,
                                          value_dim=dim // num_heads, bug=bug)

    def forward(self, x):                                                                # [b, c, h, w]
        shortcut = x
        x = self.attn(self.norm(x))
        return x + shortcut


def build(bug="", B=2, Hp=2, Wp=3, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    model = MobileAttention(D, H, bug=bug)
    with torch.no_grad():
        model.norm.running_mean.normal_()
        model.norm.running_var.uniform_(0.5, 2.0)
    return model.eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
