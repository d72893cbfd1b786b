"""huggingface/diffusers pull request #2656 ("[attention] Fix attention", merged; patrickvonplaten: "Make sure
that we don't pass ``attention_mask`` (which is only intended for self attention) to the cross attention
class"): ``BasicTransformerBlock.forward`` handed its ``attention_mask`` to both ``attn1`` (self-attention
over the image tokens) and ``attn2`` (cross-attention over the text encoder's tokens). The fix adds an
``encoder_attention_mask`` argument and gives it to ``attn2``. ``prepare_attention_mask`` pads a mask whose
length is not the keys' up to the keys' length (``F.pad(mask, (0, remaining_length), value=0.0)``), so the
image tokens' mask is laid over the text keys without an error: the text keys are hidden where image tokens
were padded, and the padded text keys stay visible.

The idiom (diffusers' ``Attention`` with ``AttnProcessor``): ``to_q``/``to_k``/``to_v``, ``head_to_batch_dim``
(``reshape(B, L, H, d).permute(0, 2, 1, 3).reshape(B * H, L, d)``), additive masks ``(B, 1, L)`` made by
``(1 - mask) * -10000.0`` and ``repeat_interleave(heads, dim=0)``, ``get_attention_scores`` as
``baddbmm(mask, q, k.transpose(-1, -2), beta=1, alpha=scale).softmax(-1)``, ``bmm`` with the values,
``batch_to_head_dim``, ``to_out``; the block's pre-norms and residuals. The second latent has two padded image
tokens and the second prompt two padded text tokens. DIMS: five image tokens and seven text tokens (first
sight was taken at ``T=4 S=6``, where T has H's size, so no name of T could be told from H's by size).

Bug (argument): ``self-mask-to-cross``: ``attn2`` given ``attention_mask`` (the image tokens')."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("self-mask-to-cross",)
TWINS = ()
DIMS = ("B=2 T=5 S=7 D=32 H=4",)


class Attention(nn.Module):
    def __init__(self, query_dim, heads, cross_attention_dim=None):
        super().__init__()
        self.heads, self.scale = heads, (query_dim // heads) ** -0.5
        cross_attention_dim = cross_attention_dim or query_dim
        self.to_q = nn.Linear(query_dim, query_dim, bias=False)
        self.to_k = nn.Linear(cross_attention_dim, query_dim, bias=False)
        self.to_v = nn.Linear(cross_attention_dim, query_dim, bias=False)
        self.to_out = nn.Linear(query_dim, query_dim)

    def head_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)
        return tensor.permute(0, 2, 1, 3).reshape(batch_size * self.heads, seq_len, dim // self.heads)

    def batch_to_head_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size // self.heads, self.heads, seq_len, dim)
        return tensor.permute(0, 2, 1, 3).reshape(batch_size // self.heads, seq_len, dim * self.heads)

    def prepare_attention_mask(self, attention_mask, target_length):
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            remaining_length = target_length - current_length
            attention_mask = F.pad(attention_mask, (0, remaining_length), value=0.0)
        return attention_mask.repeat_interleave(self.heads, dim=0)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        encoder_hidden_states = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        attention_mask = self.prepare_attention_mask(attention_mask, encoder_hidden_states.shape[1])
        query = self.head_to_batch_dim(self.to_q(hidden_states))
        key = self.head_to_batch_dim(self.to_k(encoder_hidden_states))
        value = self.head_to_batch_dim(self.to_v(encoder_hidden_states))
        baddbmm_input = attention_mask
        beta = 1
        if attention_mask is None:
            baddbmm_input = torch.empty(query.shape[0], query.shape[1], key.shape[1])
            beta = 0
        attention_scores = torch.baddbmm(baddbmm_input, query, key.transpose(-1, -2), beta=beta, alpha=self.scale)
        attention_probs = attention_scores.softmax(dim=-1)
        hidden_states = self.batch_to_head_dim(torch.bmm(attention_probs, value))
        return self.to_out(hidden_states)


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads)
        self.attn2 = Attention(dim, heads, cross_attention_dim=dim)

    def forward(self, hidden_states, encoder_hidden_states, attention_mask, encoder_attention_mask):
        hidden_states = self.attn1(self.norm1(hidden_states), attention_mask=attention_mask) + hidden_states
        cross_mask = attention_mask if self.bug == "self-mask-to-cross" else encoder_attention_mask   # [mask]
        hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states,
                                   attention_mask=cross_mask) + hidden_states
        return hidden_states


class Block(nn.Module):
    """The caller: keep-masks ``(B, L)`` of ones and zeros made additive ``(B, 1, L)``."""

    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.block = BasicTransformerBlock(dim, heads, bug)

    def forward(self, hidden_states, encoder_hidden_states, image_keep, text_keep):
        attention_mask = ((1 - image_keep.float()) * -10000.0).unsqueeze(1)
        encoder_attention_mask = ((1 - text_keep.float()) * -10000.0).unsqueeze(1)
        return self.block(hidden_states, encoder_hidden_states, attention_mask, encoder_attention_mask)


def build(bug="", B=2, T=5, S=7, D=32, H=4):
    torch.manual_seed(0)
    image_keep, text_keep = torch.ones(B, T), torch.ones(B, S)
    image_keep[1, -2:] = 0
    text_keep[1, -2:] = 0
    return Block(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), image_keep, text_keep)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
