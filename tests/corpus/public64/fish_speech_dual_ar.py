"""fishaudio/fish-speech, fish_speech/models/text2semantic/llama.py (v1.4, ``DualARTransformer.forward``,
``BaseTransformer.embed``, ``Attention``, ``apply_rotary_emb``, ``precompute_freqs_cis``): the dual
autoregressive decoder of Fish Speech. The input ``inp`` is ``(b, 1 + K, s)``: row 0 the semantic/text token, rows
1..K the codebooks of each frame; the slow transformer embeds each frame as the sum of its token's and its codes'
embeddings (``codebook_embeddings(inp[:, i + 1] + i * codebook_size)``) and runs causally over the ``s`` frames
(gpt-fast's attention: ``wqkv`` split, ``view(bsz, seqlen, n_head, head_dim)``, rotary on interleaved pairs from
``freqs_cis[:seqlen]``, ``transpose(1, 2)``, ``scaled_dot_product_attention`` with ``causal_mask[None, None,
:seqlen, :seqlen]``). The fast transformer then runs over the codebooks of each frame: the codes shifted one frame
left (``codebooks = inp[:, 1:-1, 1:]``, ``F.pad(codebooks, (0, 1))``: the fast pass at frame ``t`` reads the codes
it predicts, those of frame ``t + 1``), embedded (``fast_embeddings``), put behind the slow hidden state
(``torch.cat([x[:, None], codebook_embeddings], dim=1)``, ``(b, K, s, d)``), folded ``rearrange(x, "b n s d -> (b s)
n d")`` into one sequence of ``K`` per frame, the same attention with the fast mask and ``fast_freqs_cis[:K]``,
and unfolded ``rearrange(codebook_logits, "(b s) n d -> b s n d", b=b)``. (The padded-frame removal,
``x[~codebook_mask]``, is left out.)

Bugs: ``fold-reshape-unmoved``: the fold written ``x.reshape(b * s, -1, d)`` on ``(b, n, s, d)`` without moving
``s`` before ``n`` (each "frame's" sequence is a run of one codebook's frames); ``unfold-seq-major``: the way back
read as ``"(s b) n d -> b s n d"`` (frames of different batch entries exchanged); ``codes-not-shifted``:
``codebooks = inp[:, 1:-1]`` with no shift and no pad (the fast pass at frame ``t`` reads frame ``t``'s codes while
the slow state predicts frame ``t + 1``: off by one frame, the shapes right)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

CODEBOOK, VOCAB = 16, 40


def precompute_freqs_cis(seq_len, n_elem, base=10000):
    freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2)[: (n_elem // 2)].float() / n_elem))
    freqs = torch.outer(torch.arange(seq_len), freqs)                              # (S, d/2)
    return torch.stack([freqs.cos(), freqs.sin()], dim=-1)                          # (S, d/2, 2)


def apply_rotary_emb(x, freqs_cis):
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)                               # (B, T, H, d/2, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)           # (1, T, 1, d/2, 2)
    x_out2 = torch.stack([xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
                          xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1]], -1)
    return x_out2.flatten(3).type_as(x)                                             # (B, T, H, d)


class Attention(nn.Module):
    def __init__(self, dim, n_head):
        super().__init__()
        self.dim, self.n_head, self.head_dim = dim, n_head, dim // n_head
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        q, k, v = self.wqkv(x).split([self.dim, self.dim, self.dim], dim=-1)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)                         # (B, T, H, d)
        k = k.view(bsz, seqlen, self.n_head, self.head_dim)
        v = v.view(bsz, seqlen, self.n_head, self.head_dim)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        q, k, v = map(lambda t: t.transpose(1, 2), (q, k, v))                       # (B, H, T, d)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)                 # (B, H, T, d)
        y = y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim)              # (B, T, D)
        return x + self.wo(y)


class DualARTransformer(nn.Module):
    def __init__(self, dim, n_head, num_codebooks, max_seq_len=32, bug=""):
        super().__init__()
        self.num_codebooks, self.bug = num_codebooks, bug
        self.embeddings = nn.Embedding(VOCAB, dim)
        self.codebook_embeddings = nn.Embedding(CODEBOOK * num_codebooks, dim)
        self.layer, self.fast_layer = Attention(dim, n_head), Attention(dim, n_head)
        self.fast_project_in = nn.Identity()
        self.fast_embeddings = nn.Embedding(CODEBOOK, dim)
        self.output, self.fast_output = nn.Linear(dim, VOCAB, bias=False), nn.Linear(dim, CODEBOOK, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(max_seq_len, dim // n_head), persistent=False)
        self.register_buffer("fast_freqs_cis", precompute_freqs_cis(num_codebooks, dim // n_head), persistent=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool)))

    def embed(self, x):                                                             # (b, 1 + K, s)
        vocab_embeds = [self.embeddings(x[:, 0])]
        for i in range(self.num_codebooks):
            vocab_embeds.append(self.codebook_embeddings(x[:, i + 1] + i * CODEBOOK))
        return torch.stack(vocab_embeds, dim=3).sum(dim=3)                          # (b, s, d)

    def forward(self, inp):                                                         # (b, 1 + K, s)
        seq_len = inp.size(2)
        x = self.layer(self.embed(inp), self.freqs_cis[:seq_len], self.causal_mask[None, None, :seq_len, :seq_len])
        token_logits = self.output(x)                                               # (b, s, V)
        x = self.fast_project_in(x)
        fast_seq_len = self.num_codebooks
        fast_mask = self.causal_mask[None, None, :fast_seq_len, :fast_seq_len]
        fast_freqs_cis = self.fast_freqs_cis[:fast_seq_len]
        if self.bug == "codes-not-shifted":
            codebooks = inp[:, 1:-1]                                                # (b, K - 1, s)
        else:
            codebooks = F.pad(inp[:, 1:-1, 1:], (0, 1), value=0)                    # (b, K - 1, s)
        codebook_embeddings = self.fast_embeddings(codebooks)                       # (b, K - 1, s, d)
        x = torch.cat([x[:, None], codebook_embeddings], dim=1)                     # (b, K, s, d)
        b, s = x.size(0), x.size(2)
        if self.bug == "fold-reshape-unmoved":
            x = x.reshape(b * s, -1, x.size(-1))                                    # read as ((b s), n, d)
        else:
            x = rearrange(x, "b n s d -> (b s) n d")                                # ((b s), K, d)
        codebook_logits = self.fast_output(self.fast_layer(x, fast_freqs_cis, fast_mask))   # ((b s), K, C)
        if self.bug == "unfold-seq-major":
            return token_logits, rearrange(codebook_logits, "(s b) n d -> b s n d", b=b)
        return token_logits, rearrange(codebook_logits, "(b s) n d -> b s n d", b=b)  # (b, s, K, C)


BUGS = ("fold-reshape-unmoved", "unfold-seq-major", "codes-not-shifted")
TWINS = ()
DIMS = ("B=2 T=6 D=40 H=4",)   # (8 codebooks: 1 + K = 9, K - 1 = 7, d_k = 10, none equal to a declared size)
EQUAL = {DIMS[0]: "B=4 T=4 D=40 H=4"}


def build(bug="", B=2, T=6, D=40, H=4, K=8):  # noqa: N803
    """``T`` frames of a semantic token and ``K`` codebooks' codes (8, as Fish Speech's codec has)."""
    torch.manual_seed(0)
    inp = torch.cat([torch.randint(0, VOCAB, (B, 1, T)), torch.randint(0, CODEBOOK, (B, K, T))], dim=1)
    return DualARTransformer(D, H, num_codebooks=K, bug=bug).eval(), (inp,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
