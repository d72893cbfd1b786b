"""facebookresearch/Motionformer pull request #6 ("temporal attention fix", merged; after issue #5, "An uncleared
step in TrajectoryAttention.forward()", whose reporter asked why the last einsum weighs ``x`` and not the values
of the paper's temporal attention): in slowfast/models/vit_helper.py ``TrajectoryAttention.forward`` the
temporal step pooled the trajectory tokens ``x`` themselves, ``einsum('b h s f, b h s f d -> b h s d', attn, x)``,
where the paper pools their value projection ``v2`` (``k2, v2 = self.proj_kv(x).chunk(2, dim=-1)``). The PR keeps
the old line behind ``use_original_code=True`` ("a typo ... v = x rather than v = Wx ... not recommended").

The idiom (Motionformer's trajectory attention, one block, full attention): ``qkv`` chunked and rearranged
``'b n (h d) -> (b h) n d'``; the class token split off and attending to every token (``qkv_attn``); the patch
queries against all patch keys, ``rearrange(q_dot_k, 'b q (f n) -> b q f n', f=F)`` and a softmax over each
frame's ``n`` patches (the spatial step: one trajectory point per query and frame), ``einsum('b q f n, b f n d ->
b q f d')``; the heads merged ``'(b h) s f d -> b s f (h d)'``, the query's own-frame point taken with
``torch.diagonal`` over ``'b (g n) f d -> b g n f d'`` as ``q2``, ``proj_kv`` on the trajectories, the temporal
softmax over the ``F`` frames, the class token concatenated back and ``proj``; a pre-norm residual block.

Bugs (argument): ``v-is-x``: the temporal step pools the unprojected trajectories ``x`` (Motionformer's original
code, #6); ``space-softmax-all-frames``: the spatial softmax taken over all ``F * P`` patch keys before splitting
them into frames (each query's weights sum to 1 over the whole clip, not once per frame: the trajectory points
shrink by about ``1/F``)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn

BUGS = ("v-is-x", "space-softmax-all-frames")
TWINS = ()
DIMS = ("B=2 F=3 P=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 F=4 P=4 D=32 H=4"}


def qkv_attn(q, k, v):
    sim = einsum('b i d, b j d -> b i j', q, k)                                      # (B*H, i, j)
    attn = sim.softmax(dim=-1)
    return einsum('b i j, b j d -> b i d', attn, v)                                  # (B*H, i, d)


class TrajectoryAttention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj_kv = nn.Linear(dim, dim * 2, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, seq_len, num_frames):
        B, N, C = x.shape
        P, F, h = seq_len, num_frames, self.num_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> (b h) n d', h=h), (q, k, v))   # (B*H, 1+F*P, d)
        (cls_q, q_), (cls_k, k_), (cls_v, v_) = map(lambda t: (t[:, 0:1], t[:, 1:]), (q, k, v))
        cls_out = qkv_attn(cls_q * self.scale, k, v)                                 # (B*H, 1, d)
        cls_out = rearrange(cls_out, '(b h) f d -> b f (h d)', f=1, h=h)             # (B, 1, D)

        q_dot_k = q_ @ k_.transpose(-2, -1)                                          # (B*H, F*P, F*P)
        if self.bug == "space-softmax-all-frames":
            space_attn = (self.scale * q_dot_k).softmax(dim=-1)
            space_attn = rearrange(space_attn, 'b q (f n) -> b q f n', f=F)          # (B*H, F*P, F, P)
        else:
            q_dot_k = rearrange(q_dot_k, 'b q (f n) -> b q f n', f=F)                # (B*H, F*P, F, P)
            space_attn = (self.scale * q_dot_k).softmax(dim=-1)
        v_ = rearrange(v_, 'b (f n) d -> b f n d', f=F, n=P)                         # (B*H, F, P, d)
        x = einsum('b q f n, b f n d -> b q f d', space_attn, v_)                    # (B*H, F*P, F, d)

        x = rearrange(x, '(b h) s f d -> b s f (h d)', b=B)                          # (B, F*P, F, D)
        x_diag = rearrange(x, 'b (g n) f d -> b g n f d', g=F)                       # (B, F, P, F, D)
        x_diag = torch.diagonal(x_diag, dim1=-4, dim2=-2)                            # (B, P, D, F)
        x_diag = rearrange(x_diag, 'b n d f -> b (f n) d', f=F)                      # (B, F*P, D)
        q2 = self.proj_q(x_diag)
        k2, v2 = self.proj_kv(x).chunk(2, dim=-1)                                    # (B, F*P, F, D)
        q2 = rearrange(q2, 'b s (h d) -> b h s d', h=h) * self.scale                 # (B, H, F*P, d)
        k2, v2 = map(lambda t: rearrange(t, 'b s f (h d) -> b h s f d', f=F, h=h), (k2, v2))  # (B, H, F*P, F, d)
        attn = einsum('b h s d, b h s f d -> b h s f', q2, k2)                       # (B, H, F*P, F)
        attn = attn.softmax(dim=-1)
        if self.bug == "v-is-x":
            x = rearrange(x, 'b s f (h d) -> b h s f d', f=F, h=h)                   # (B, H, F*P, F, d)
            x = einsum('b h s f, b h s f d -> b h s d', attn, x)                     # (B, H, F*P, d)
        else:
            x = einsum('b h s f, b h s f d -> b h s d', attn, v2)                    # (B, H, F*P, d)
        x = rearrange(x, 'b h s d -> b s (h d)')                                     # (B, F*P, D)
        x = torch.cat((cls_out, x), dim=1)                                           # (B, 1+F*P, D)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = TrajectoryAttention(dim, num_heads=num_heads, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, seq_len, num_frames):
        x = x + self.attn(self.norm1(x), seq_len=seq_len, num_frames=num_frames)
        return x + self.mlp(self.norm2(x))


class Video(nn.Module):
    def __init__(self, dim, num_heads, seq_len, num_frames, bug=""):
        super().__init__()
        self.seq_len, self.num_frames = seq_len, num_frames
        self.block = Block(dim, num_heads, bug)

    def forward(self, x):                                                            # (B, 1+F*P, D)
        return self.block(x, self.seq_len, self.num_frames)


def build(bug="", B=2, F=3, P=5, D=32, H=4):
    torch.manual_seed(0)
    return Video(D, H, P, F, bug).eval(), (torch.randn(B, 1 + F * P, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
