"""rasbt/LLMs-from-scratch issue #1008 ("SWA window size problem"; fixed by pull request #1013, "Fix SWA"):
``ch04/06_swa/gpt_with_kv_swa.py``, ``MultiHeadAttentionWithSWA.forward`` with ``use_cache=True`` joined the new
keys and values onto the cache and then left-trimmed the cache to the window, ``self.cache_k[:, -W:, :, :]``,
*before* attending with it. The reporter: "If the query token size >= 2, the first token of the query may lose
some data", the cut should keep ``W + num_tokens - 1`` keys. A chunk of N tokens fed after the cache attends only
the last W keys, so its earliest queries lose the older keys their window still covers (the mask, computed from
``k_start_pos_abs = ptr_current_pos - old_len + dropped``, is consistent with the cut: nothing shows). The fix
keeps ``attn_keep = min(len, W + num_tokens - 1)`` keys for attention and stores only the last W in the cache.

The idiom (the book's chapter-4 bonus code): ``W_query``/``W_key``/``W_value`` Linears, ``view(b, num_tokens,
num_heads, head_dim)``, the cache joined on dim 1 (token-major ``(b, tokens, heads, head_dim)``), ``transpose(1,
2)`` after the cache, a mask from absolute positions ``diff = q_positions.unsqueeze(-1) -
k_positions.unsqueeze(0)``, ``(diff < 0) | (diff >= W)``, ``masked_fill_(-inf)``, ``softmax(scores /
sqrt(head_dim), dim=-1)``, ``(attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, d_out)``,
``out_proj``. Here one window of 6: a prompt of T (<= 6) tokens, a chunk of N = 3 that crosses the window, one
decoded token; the outputs joined on the tokens.

Bugs (cache): ``cut-before-attention`` (the reported code: keys cut to the last W before the chunk attends);
``cache-keeps-oldest``: ``combined_k[:, :cache_keep]`` (the oldest W tokens stored, not the newest: the decoded
token's keys are the prompt's, labelled with the positions of the newest)."""

import sys

import torch
from torch import nn

BUGS = ("cut-before-attention", "cache-keeps-oldest")
TWINS = ()
DIMS = ("B=2 T=5 N=3 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 N=3 D=32 H=4"}


class MultiHeadAttentionWithSWA(nn.Module):
    def __init__(self, d_in, d_out, num_heads, sliding_window_size=None, bug=""):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim, self.bug = d_out, num_heads, d_out // num_heads, bug
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.sliding_window_size = sliding_window_size
        self.cache_k, self.cache_v, self.ptr_current_pos = None, None, 0

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape
        keys_new = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim)      # (b, n, H, d)
        values_new = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
        old_len = 0 if self.cache_k is None else self.cache_k.size(1)
        if self.cache_k is None:
            combined_k, combined_v = keys_new, values_new
        else:
            combined_k = torch.cat([self.cache_k, keys_new], dim=1)                      # (b, old+n, H, d)
            combined_v = torch.cat([self.cache_v, values_new], dim=1)
        W = self.sliding_window_size
        cache_keep = min(combined_k.size(1), W)
        if self.bug == "cut-before-attention":
            attn_keep = cache_keep
        else:
            attn_keep = min(combined_k.size(1), W + num_tokens - 1)
        keys, values = combined_k[:, -attn_keep:, :, :], combined_v[:, -attn_keep:, :, :]
        if self.bug == "cache-keeps-oldest":
            self.cache_k, self.cache_v = combined_k[:, :cache_keep, :, :], combined_v[:, :cache_keep, :, :]
        else:
            self.cache_k, self.cache_v = combined_k[:, -cache_keep:, :, :], combined_v[:, -cache_keep:, :, :]
        dropped = combined_k.size(1) - keys.size(1)
        k_start_pos_abs = (self.ptr_current_pos - old_len) + dropped
        q_start_pos_abs = self.ptr_current_pos

        keys, queries, values = keys.transpose(1, 2), queries.transpose(1, 2), values.transpose(1, 2)  # (b, H, ., d)
        attn_scores = queries @ keys.transpose(2, 3)                                     # (b, H, n, K)
        num_tokens_Q, num_tokens_K = queries.shape[-2], keys.shape[-2]
        q_positions = torch.arange(q_start_pos_abs, q_start_pos_abs + num_tokens_Q, dtype=torch.long)
        k_positions = torch.arange(k_start_pos_abs, k_start_pos_abs + num_tokens_K, dtype=torch.long)
        diff = q_positions.unsqueeze(-1) - k_positions.unsqueeze(0)                      # (n, K)
        mask_bool = (diff < 0) | (diff >= W)
        self.ptr_current_pos += num_tokens_Q
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = (attn_weights @ values).transpose(1, 2)                            # (b, n, H, d)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)           # (b, n, D)
        return self.out_proj(context_vec)

    def reset_cache(self):
        self.cache_k, self.cache_v, self.ptr_current_pos = None, None, 0


class ChunkedDecoding(nn.Module):
    """A prompt, a chunk of the prompt's continuation, one decoded token: three cached calls."""

    def __init__(self, emb_dim, n_heads, window, bug=""):
        super().__init__()
        self.att = MultiHeadAttentionWithSWA(emb_dim, emb_dim, n_heads, sliding_window_size=window, bug=bug)

    def forward(self, prompt, chunk, next_token):                        # (B, T, D), (B, N, D), (B, 1, D)
        self.att.reset_cache()
        outs = [self.att(x, use_cache=True) for x in (prompt, chunk, next_token)]
        return torch.cat(outs, dim=1)                                                    # (B, T+N+1, D)


def build(bug="", B=2, T=5, N=3, D=32, H=4):
    torch.manual_seed(0)
    inputs = (torch.randn(B, T, D), torch.randn(B, N, D), torch.randn(B, 1, D))
    return ChunkedDecoding(D, H, window=6, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
