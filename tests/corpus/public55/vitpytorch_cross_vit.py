"""lucidrains/vit-pytorch, vit_pytorch/cross_vit.py (``Attention`` with ``kv_include_self``, ``ProjectInOut``,
``CrossTransformer``): CrossViT's cross-attention in lucidrains' einops style. Each branch's class token is the
only query (``t[:, :1]``); it is projected to the other branch's width (``ProjectInOut``: ``project_in``, the
attention, ``project_out``) and attends over the other branch's patch tokens with itself joined in front
(``context = torch.cat((x, context), dim = 1)`` after ``self.norm(x)``); ``to_q`` on the class token, ``to_kv``
``chunk(2, dim = -1)`` on the context; ``rearrange(t, 'b n (h d) -> b h n d')``; scores ``einsum('b h i d, b h j d
-> b h i j')`` of shape ``(b, h, 1, 1 + n)``, ``nn.Softmax(dim = -1)``; ``einsum('b h i j, b h j d -> b h i d')``,
``rearrange(out, 'b h n d -> b n (h d)')``, ``to_out``; the class tokens joined back before their own patches.
The small branch has ``T`` tokens of width ``D``, the large branch ``S`` tokens of width ``2 D``.

Bugs: ``softmax-over-queries``: ``nn.Softmax(dim = -2)`` (over the query axis, which has one entry: every weight
is 1 and the class token sums the values of all keys instead of averaging them); ``merge-d-h``: ``rearrange(out,
'b h n d -> b n (d h)')`` (the heads merged head-minor while ``to_q``/``to_kv`` split them head-major: the
features ``to_out`` reads are interleaved across heads).
Twin: ``context-first``: ``torch.cat((context, x), dim = 1)`` (the class token after the patches: no position
enters the attention, so the order of the keys changes nothing)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


def default(val, d):
    return val if val is not None else d


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-2 if bug == "softmax-over-queries" else -1)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)
        self.bug = bug

    def forward(self, x, context=None, kv_include_self=False):
        h = self.heads
        x = self.norm(x)
        context = default(context, x)
        if kv_include_self:
            if self.bug == "context-first":
                context = torch.cat((context, x), dim=1)                             # (b, n + 1, d): twin
            else:
                context = torch.cat((x, context), dim=1)                             # (b, 1 + n, d)
        qkv = (self.to_q(x), *self.to_kv(context).chunk(2, dim=-1))
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), qkv)    # (b, h, n, d)
        dots = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale             # (b, h, 1, 1 + n)
        attn = self.attend(dots)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)                         # (b, h, 1, d)
        if self.bug == "merge-d-h":
            out = rearrange(out, "b h n d -> b n (d h)")                             # bug: head-minor merge
        else:
            out = rearrange(out, "b h n d -> b n (h d)")                             # (b, 1, h·d)
        return self.to_out(out)


class ProjectInOut(nn.Module):
    def __init__(self, dim_in, dim_out, fn):
        super().__init__()
        self.fn = fn
        need_projection = dim_in != dim_out
        self.project_in = nn.Linear(dim_in, dim_out) if need_projection else nn.Identity()
        self.project_out = nn.Linear(dim_out, dim_in) if need_projection else nn.Identity()

    def forward(self, x, *args, **kwargs):
        x = self.project_in(x)
        x = self.fn(x, *args, **kwargs)
        return self.project_out(x)


class CrossTransformer(nn.Module):
    def __init__(self, sm_dim, lg_dim, heads, dim_head, bug=""):
        super().__init__()
        self.sm_attend_lg = ProjectInOut(sm_dim, lg_dim, Attention(lg_dim, heads, dim_head, bug))
        self.lg_attend_sm = ProjectInOut(lg_dim, sm_dim, Attention(sm_dim, heads, dim_head, bug))

    def forward(self, sm_tokens, lg_tokens):
        (sm_cls, sm_patch_tokens), (lg_cls, lg_patch_tokens) = map(lambda t: (t[:, :1], t[:, 1:]),
                                                                   (sm_tokens, lg_tokens))
        sm_cls = self.sm_attend_lg(sm_cls, context=lg_patch_tokens, kv_include_self=True) + sm_cls
        lg_cls = self.lg_attend_sm(lg_cls, context=sm_patch_tokens, kv_include_self=True) + lg_cls
        sm_tokens = torch.cat((sm_cls, sm_patch_tokens), dim=1)                      # (b, 1 + n_sm, sm_dim)
        lg_tokens = torch.cat((lg_cls, lg_patch_tokens), dim=1)                      # (b, 1 + n_lg, lg_dim)
        return sm_tokens, lg_tokens


BUGS = ("softmax-over-queries", "merge-d-h")
TWINS = ("context-first",)
DIMS = ("B=2 T=7 S=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=7, S=5, D=32, H=4):
    torch.manual_seed(0)
    model = CrossTransformer(D, 2 * D, heads=H, dim_head=D // H, bug=bug)
    return model.eval(), (torch.randn(B, T, D), torch.randn(B, S, 2 * D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
