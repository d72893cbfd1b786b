"""bghira/SimpleTuner issue #904 ("Bug in Flux with Masked Attention", fixed by PR #908): Flux's joint
attention runs over ``cat([text, image])`` tokens (the text stream first: ``q = cat([q_text, q_image])``), but
the masked-attention path built the key mask in the other order, ``cat([image_mask, text_mask])``, so the
padding of the T5 text was hidden at image positions and the text's padded keys stayed visible ("the location of
text had been swapped versus sd3/auraflow"). The fix concatenates the text mask first, as the tokens are.

The idiom: diffusers' ``FluxAttnProcessor2_0`` for a double-stream block (``to_q/k/v`` on the image stream,
``add_q/k/v_proj`` on the text stream, ``view(B, -1, H, d).transpose(1, 2)``, ``norm_q``/``norm_k`` RMSNorm over
the head features, ``torch.cat([encoder_query, query], dim=2)`` and the same for keys and values, the
attention mask ``cat([text_mask, image_mask], 1)[:, None, None, :]`` (boolean) handed to
``F.scaled_dot_product_attention``, ``transpose(1, 2).reshape(B, -1, H * d)``, the result split back at the
text length, ``to_out`` / ``to_add_out``); the second prompt padded by two tokens.

Bug (argument): ``mask-image-first``: the key mask built ``cat([image_mask, text_mask])``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("mask-image-first",)
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)


class FluxJointAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.add_q_proj, self.add_k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.add_v_proj = nn.Linear(dim, dim)
        self.norm_q, self.norm_k = nn.RMSNorm(self.head_dim, eps=1e-6), nn.RMSNorm(self.head_dim, eps=1e-6)
        self.norm_added_q, self.norm_added_k = nn.RMSNorm(self.head_dim, eps=1e-6), nn.RMSNorm(self.head_dim, eps=1e-6)
        self.to_out, self.to_add_out = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def heads_first(self, x):
        return x.view(x.shape[0], -1, self.heads, self.head_dim).transpose(1, 2)      # (B, H, L, d)

    def forward(self, hidden_states, encoder_hidden_states, text_mask):     # (B, T, D), (B, S, D), (B, S)
        batch_size, text_len = encoder_hidden_states.shape[:2]
        query = self.norm_q(self.heads_first(self.to_q(hidden_states)))
        key = self.norm_k(self.heads_first(self.to_k(hidden_states)))
        value = self.heads_first(self.to_v(hidden_states))
        encoder_query = self.norm_added_q(self.heads_first(self.add_q_proj(encoder_hidden_states)))
        encoder_key = self.norm_added_k(self.heads_first(self.add_k_proj(encoder_hidden_states)))
        encoder_value = self.heads_first(self.add_v_proj(encoder_hidden_states))
        query = torch.cat([encoder_query, query], dim=2)                       # (B, H, S+T, d) text first
        key = torch.cat([encoder_key, key], dim=2)
        value = torch.cat([encoder_value, value], dim=2)

        image_mask = torch.ones(batch_size, hidden_states.shape[1], dtype=torch.bool)
        if self.bug == "mask-image-first":
            attention_mask = torch.cat([image_mask, text_mask], dim=1)        # [mask]
        else:
            attention_mask = torch.cat([text_mask, image_mask], dim=1)        # [mask]
        attention_mask = attention_mask[:, None, None, :]                      # (B, 1, 1, S+T)

        out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask)
        out = out.transpose(1, 2).reshape(batch_size, -1, self.heads * self.head_dim)
        encoder_out, out = out[:, :text_len], out[:, text_len:]
        return self.to_out(out), self.to_add_out(encoder_out)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    text_mask = torch.ones(B, S, dtype=torch.bool)
    text_mask[1, -2:] = False                                                  # the second prompt padded by two
    return FluxJointAttention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), text_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
