"""facebookresearch/audiocraft, audiocraft/modules/transformer.py (v1.3.0, ``StreamingMultiheadAttention`` with
``custom=True``, ``memory_efficient=False``: ``_get_attention_time_dimension``, ``_get_mask``, ``_apply_rope``,
``_complete_kv``, the einsum path) and audiocraft/modules/rope.py (``RotaryEmbedding.get_rotation``, ``rotate``,
``rotate_qk``): MusicGen's decoder self-attention while streaming. The packed ``in_proj_weight`` is applied with
``F.linear`` and split ``rearrange(projected, "b t (p h d) -> b t p h d")``, so q, k, v keep the custom layout
``"b t h d"`` (time on dim 1); rotary from a ``torch.polar`` table, the pairs read as complex numbers
(``view_as_complex``), started at the streaming offset (the past keys' length); ``_complete_kv`` concatenates the
past keys and values on the time dim and keeps them in ``_streaming_state``; ``_get_mask`` places the queries at
``arange(past_steps, past_steps + current_steps)`` against keys ``arange(past_steps + current_steps)``
(``torch.where(delta >= 0, 0, -inf)``); scores ``einsum("b t h d,b k h d-> b h t k")``, the mask added, softmax
over ``k``, ``einsum("b h t k,b k h d-> b t h d")``, ``rearrange("b t h d -> b t (h d)")``, ``out_proj``. Here a
prompt of ``T`` frames is streamed in, then one step.

Bugs: ``mask-queries-not-offset``: ``queries_pos = arange(current_steps)`` (the past steps not added: the step's
query is placed at position 0 and sees only the first key); ``rope-start-not-advanced``: ``rotate_qk(q, k,
start=0)`` on every call (the step rotated as position 0 while its cached keys keep their positions);
``rope-offset-from-heads-dim``: ``_apply_rope`` reading ``past_keys.shape[2]`` (the time dim of the other, ``"b h
t d"`` layout, the heads here) as the streaming offset (the step rotated as position ``H``, not ``T``)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_period=10000.0):
        super().__init__()
        adim = torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)]
        self.register_buffer("frequencies", 1.0 / (max_period ** (adim / dim)), persistent=False)

    def get_rotation(self, start, end):
        idx = torch.arange(end, dtype=torch.float32)
        angles = torch.outer(idx, self.frequencies)                                   # (end, d/2)
        return torch.polar(torch.ones_like(angles), angles)[start:end]

    def rotate(self, x, start=0, time_dim=1):
        T = x.shape[time_dim]
        target_shape = [1] * x.dim()
        target_shape[time_dim], target_shape[-1] = T, -1
        rotation = self.get_rotation(start, start + T).view(target_shape)             # (1, t, 1, d/2)
        x_complex = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))   # (b, t, h, d/2)
        return torch.view_as_real(x_complex * rotation).view_as(x).type_as(x)         # (b, t, h, d)

    def rotate_qk(self, query, key, start=0, time_dim=1):
        streaming_offset = key.shape[time_dim] - query.shape[time_dim]
        return self.rotate(query, start + streaming_offset, time_dim), self.rotate(key, start, time_dim)


class StreamingMultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.in_proj_weight = nn.Parameter(torch.randn(3 * embed_dim, embed_dim) * embed_dim ** -0.5)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.rope = RotaryEmbedding(embed_dim // num_heads)
        self._streaming_state = {}

    def _get_mask(self, current_steps, dtype):
        past_steps = 0
        if "past_keys" in self._streaming_state:
            past_steps = self._streaming_state["past_keys"].shape[1]
        if self.bug == "mask-queries-not-offset":
            queries_pos = torch.arange(current_steps).view(-1, 1)
        else:
            queries_pos = torch.arange(past_steps, current_steps + past_steps).view(-1, 1)
        keys_pos = torch.arange(past_steps + current_steps).view(1, -1)
        delta = queries_pos - keys_pos                                                # (t, k)
        return torch.where(delta >= 0, torch.zeros([], dtype=dtype), torch.full([], float("-inf"), dtype=dtype))

    def _apply_rope(self, query, key):
        streaming_offset = 0
        if "past_keys" in self._streaming_state and self.bug != "rope-start-not-advanced":
            time_dim = 2 if self.bug == "rope-offset-from-heads-dim" else 1
            streaming_offset = self._streaming_state["past_keys"].shape[time_dim]
        return self.rope.rotate_qk(query, key, start=streaming_offset, time_dim=1)

    def _complete_kv(self, k, v):
        if "past_keys" in self._streaming_state:
            k = torch.cat([self._streaming_state["past_keys"], k], dim=1)             # (b, p + t, h, d)
            v = torch.cat([self._streaming_state["past_values"], v], dim=1)           # (b, p + t, h, d)
        self._streaming_state["past_keys"], self._streaming_state["past_values"] = k, v
        return k, v

    def forward(self, query):                                                         # (b, t, c)
        attn_mask = self._get_mask(query.shape[1], query.dtype)                       # (t, p + t)
        projected = F.linear(query, self.in_proj_weight)                              # (b, t, 3 c)
        packed = rearrange(projected, "b t (p h d) -> b t p h d", p=3, h=self.num_heads)
        q, k, v = packed.unbind(dim=2)                                                # (b, t, h, d)
        q, k = self._apply_rope(q, k)
        k, v = self._complete_kv(k, v)                                                # (b, p + t, h, d)
        q = q / q.shape[-1] ** 0.5
        pre_w = torch.einsum("b t h d,b k h d-> b h t k", q, k)                       # (b, h, t, p + t)
        pre_w = pre_w + attn_mask
        w = torch.softmax(pre_w, dim=-1)
        x = torch.einsum("b h t k,b k h d-> b t h d", w, v)                           # (b, t, h, d)
        x = rearrange(x, "b t h d -> b t (h d)", h=self.num_heads)                    # (b, t, c)
        return self.out_proj(x)


class StreamingDecoder(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = StreamingMultiheadAttention(dim, num_heads, bug)

    def forward(self, prompt, step):                                                  # (b, t, c), (b, 1, c)
        self.self_attn._streaming_state = {}
        x = prompt + self.self_attn(self.norm1(prompt))
        y = step + self.self_attn(self.norm1(step))
        return x, y


BUGS = ("mask-queries-not-offset", "rope-start-not-advanced", "rope-offset-from-heads-dim")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    """A prompt of ``T`` frames' embeddings streamed in, then one step."""
    torch.manual_seed(0)
    return StreamingDecoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
