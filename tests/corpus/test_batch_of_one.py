"""A batch of one folded into another axis (``view(tgt_len, bsz * num_heads, head_dim)`` at ``bsz = 1``):
the fold holds the other axis alone. Before, torch's own ``nn.MultiheadAttention`` and fairseq-style
seq-first attention at B = 1 got scores ``[H, T·B, T·B]`` and a false ``✗ attends-over-batch`` on
correct code (the one batch entry read as a batch the queries weigh). The twin below keeps the real bug:
keys laid along the batch at B = 2 are still ``attends-over-batch``.

Sources: pytorch ``torch/nn/functional.py`` ``multi_head_attention_forward`` (``q.view(tgt_len, bsz *
num_heads, head_dim).transpose(0, 1)``, then ``baddbmm``/``bmm``), which ``nn.MultiheadAttention`` runs;
facebookresearch/fairseq ``fairseq/modules/multihead_attention.py`` (the same view, ``torch.bmm(q,
k.transpose(1, 2))``); tests/styles/seq_first.py and tests/styles/mha_batch_first.py.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from tests.corpus import test_decoding
from tests.corpus.helpers import traced_build
from tests.corpus.public6 import sam_encoder
from tests.styles import mha_batch_first, mha_seq_first


class FairseqAttention(nn.Module):
    """fairseq ``MultiheadAttention.forward`` on ``[T, B, D]``: heads folded with the batch by
    ``view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)``. ``bug``: the input read as if batch
    first (``view(T, B, H, d_k).transpose(1, 2)`` of ``[T, B, D]``): the scores weigh batch entries."""

    def __init__(self, dim: int, heads: int, bug: bool = False):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(dim, dim) for _ in range(3))

    def forward(self, query):
        tgt_len, bsz, dim = query.size()  # (T, B, D)
        hd = dim // self.heads
        if self.bug:
            q = self.q_proj(query).view(tgt_len, bsz, self.heads, hd).transpose(1, 2)  # (T, H, B, d_k)
            k = self.k_proj(query).view(tgt_len, bsz, self.heads, hd).transpose(1, 2)  # (T, H, B, d_k)
            return (q @ k.transpose(-2, -1)).softmax(-1)  # (T, H, B, B)
        q = self.q_proj(query).contiguous().view(tgt_len, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        k = self.k_proj(query).contiguous().view(-1, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        v = self.v_proj(query).contiguous().view(-1, bsz * self.heads, hd).transpose(0, 1)  # (B*H, T, d_k)
        scores = torch.bmm(q, k.transpose(1, 2))  # (B*H, T, T)
        return torch.bmm(F.softmax(scores, dim=-1), v).transpose(0, 1).contiguous().view(tgt_len, bsz, dim)  # (T, B, D)


def _traced(model, x, dims: str, names: str | None = None):
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        if names:
            shapetrace.name(x, names)
        model(x)
    return t


def _findings(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity in ("error", "warning")]


@pytest.mark.parametrize("T", [6, 4], ids=["T=6", "T=H=4"])
def test_fairseq_heads_folded_with_a_batch_of_one(T):
    torch.manual_seed(0)
    t = _traced(FairseqAttention(32, 4).eval(), torch.randn(T, 1, 32), f"B=1 T={T} D=32 H=4", "T B D")
    assert _findings(t) == []
    scores = [e.outputs[0].dims for e in t.events if e.op == "bmm"][0]
    assert scores == ("H", "T", "T")   # (B·H of one batch entry: the heads alone)
    assert t.report().verdict.mark == "✓"


@pytest.mark.parametrize("style", [mha_batch_first, mha_seq_first], ids=["batch_first", "seq_first"])
def test_torch_multihead_attention_with_a_batch_of_one(style):
    """tests/styles' ``nn.MultiheadAttention`` blocks at B = 1 (a key padding mask: ``baddbmm``; none: ``bmm``)."""
    model, inputs = style.build({"B": 1, "T": 6, "D": 32, "H": 4})
    with torch.no_grad(), shapetrace.trace(dims="B=1 T=6 D=32 H=4") as t:
        for x, names in zip(inputs, getattr(style, "NAMES", ()) or ()):
            if names:
                shapetrace.name(x, names)
        model(*inputs)
    assert _findings(t) == []
    assert [e.outputs[0].dims for e in t.events if e.op in ("bmm", "baddbmm")][0] == ("H", "T", "T")   # (scores)


def test_keys_along_the_batch_are_still_attention_over_the_batch():
    torch.manual_seed(0)
    t = _traced(FairseqAttention(32, 4, bug=True).eval(), torch.randn(6, 2, 32), "B=2 T=6 D=32 H=4", "T B D")
    assert _findings(t) == ["attends-over-batch"]


# -- the sweep: every correct public-style file at a batch of one (issue 33) ---------------------------
# Each module's docstring names the public code it follows (path and function); the sizes are the file's
# own (DIMS where it has them) with B = 1 and every other size distinct. A batch of one is what most
# users run (one image, one prompt): an axis of one entry is left out of every fold, so nothing may
# hang on seeing it.

B1_FILES = [
    ("public5.bert_self", "B=1 T=6 D=32 H=4"),           # transformers BertSelfAttention
    ("public5.clip_text", "B=1 T=6 D=32 H=4"),           # transformers CLIPTextTransformer
    ("public5.clip_vision", "B=1 D=32 H=4"),             # openai/CLIP VisionTransformer
    ("public5.deepseek_mla", "B=1 T=6 D=32 H=4"),        # DeepSeek-V2 DeepseekV2Attention
    ("public5.diffusers_attn", "B=1 T=12 S=5 D=32 H=4 C:features=24"),  # diffusers Attention/AttnProcessor
    ("public5.mpt_alibi", "B=1 T=6 D=32 H=4"),           # llm-foundry build_alibi_bias
    ("public5.perceiver", "B=1 T=7 L=5 D=32 H=4 C:features=24"),  # lucidrains/perceiver-pytorch
    ("public5.swinv2_cosine", "B=1 T=6 D=32 H=4"),       # Swin-Transformer swin_transformer_v2.py
    ("public5.whisper", "B=1 T=6 S=5 D=32 H=4"),         # openai/whisper model.py
    ("public5.xformers_ref", "B=1 T=6 D=32 H=4"),        # xformers ref_attention_bmhk
    ("public6.bigcode_mqa", "B=1 T=6 D=32 H=4"),         # transformers GPTBigCodeAttention
    ("public6.espnet_conformer", "B=1 T=6 D=32 H=4"),    # espnet RelPositionMultiHeadedAttention
    ("public6.gemma_pytorch", "B=1 T=6 D=32 H=4 H_kv=2"),  # google/gemma_pytorch GemmaAttention
    ("public6.ldm_cross", "B=1 Hp=3 Wp=5 S=7 D=32 H=4 C:features=24"),  # CompVis latent-diffusion
    ("public6.meta_llama", "B=1 T=6 D=32 H=4 H_kv=2"),   # meta-llama/llama model.py
    ("public6.olmo", "B=1 T=6 D=32 H=4"),                # allenai/OLMo olmo/model.py
    ("public6.sam_encoder", "B=1 Hp=10 Wp=14 D=32 H=4"),  # segment-anything image_encoder.py
    ("public6.transformer_xl", "B=1 T=6 D=32 H=4"),      # kimiyoung/transformer-xl mem_transformer.py
    ("public7.cait", "B=1 T=6 D=32 H=4"),                # facebookresearch/deit cait_models.py
    ("public7.chatglm2", "B=1 T=6 D=32 H=4 H_kv=2"),     # THUDM/ChatGLM2-6B modeling_chatglm.py
    ("public7.deberta_v2", "B=1 T=6 D=32 H=4"),          # transformers DisentangledSelfAttention
    ("public7.fairseq_mha", "B=1 T=6 D=32 H=4"),         # fairseq MultiheadAttention
    ("public7.linformer", "B=1 T=12 D=32 H=4"),          # lucidrains/linformer
    ("public7.mmdit", "B=1 T=12 S=5 D=32 H=4"),          # diffusers JointAttnProcessor2_0 (SD3)
    ("public7.pvt", "B=1 T=24 Hp=6 Wp=4 D=32 H=4"),      # whai362/PVT Attention with sr_ratio
    ("public7.retnet", "B=1 T=6 D=32 H=4"),              # microsoft/torchscale MultiScaleRetention
    ("public7.set_transformer", "B=1 T=6 D=32 H=4"),     # juho-lee/set_transformer MAB, PMA
    ("vision.diff_transformer", "B=1 T=6 D=48 H=3"),     # microsoft/unilm Diff-Transformer
]


@pytest.mark.parametrize("path,dims", B1_FILES, ids=[p for p, _ in B1_FILES])
def test_correct_public_files_at_a_batch_of_one(path, dims):
    """No error or warning on a correct file traced at B = 1. Before, SAM's image encoder was ``✗
    mixed-axis`` there: its windows folded with the heads (``reshape(3, B * heads, h * w, -1)``) were
    recognised only beside a batch atom, and at B = 1 there is none."""
    module = importlib.import_module(f"tests.corpus.{path}")
    torch.manual_seed(0)
    assert _findings(traced_build(module, "", dims)) == []


STYLE_NAMES = ["alibi", "annotated", "bloom", "cross_attention", "linear_attention", "lucidrains",
               "mha_batch_first", "mha_seq_first", "mingpt", "mqa", "nanogpt", "neox", "rope", "sdpa_gqa",
               "seq_first", "swin", "t5"]


@pytest.mark.parametrize("name", STYLE_NAMES)
def test_correct_styles_at_a_batch_of_one(name):
    """tests/styles (each cites its public source: nanoGPT, the Annotated Transformer, Bloom, T5, Swin...)
    at its first sizes with B = 1: no error or warning."""
    module = importlib.import_module(f"tests.styles.{name}")
    sizes = {**module.SIZES[0], "B": 1}
    model, inputs = module.build(dict(sizes))
    with torch.no_grad(), shapetrace.trace(dims=sizes) as t:
        for x, names in zip(inputs, getattr(module, "NAMES", ()) or ()):
            if names:
                shapetrace.name(x, names)
        model(*inputs)
    assert _findings(t) == []


def test_sam_windows_folded_with_heads_at_a_batch_of_one():
    """segment-anything ``Attention.forward``: ``qkv.reshape(3, B * self.num_heads, H * W, -1)`` of
    windows ``(B·nW, h·w, ...)``; at B = 1 the fold is (nW)·H: windows with heads, as B·H keeps tokens
    apart (was ``✗ mixed-axis`` on 883cc17)."""
    t = traced_build(sam_encoder, "", "B=1 Hp=10 Wp=14 D=32 H=4")
    fold = next(e for e in t.events if e.op == "reshape" and "B * self.num_heads" in e.code)
    assert fold.outputs[0].dims == ("qkv", "Hp/2*Wp/2*H", "Hp%2*Wp%2", "d_k")
    assert _findings(t) == []


@pytest.mark.parametrize("bug,kind", [("rel-swapped", "broadcast-mismatch"),
                                      ("unpartition-no-permute", "mixed-axis")])
def test_sam_bugs_keep_their_error_at_a_batch_of_one(bug, kind):
    # the twins: the decomposed bias laid the wrong way, window_unpartition without its permute
    t = traced_build(sam_encoder, bug, "B=1 Hp=10 Wp=14 D=32 H=4")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == [kind]


def _first_entry(inputs: tuple) -> tuple:
    """The builders make a batch of two: keep entry 0 of each input that has a batch of two."""
    return tuple(x[:1] if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] == 2 else x for x in inputs)


VISION_FILES = [  # the sizes and names tests/corpus/test_vision_files.py traces them with, B = 1
    ("maxvit", "B=1 D=24 H=3", ("B D Hp Wp",)),      # google-research/maxvit (block and grid attention)
    ("mae", "B=1 N=16 D=24 H=3", ()),                # facebookresearch/mae models_mae.py
    ("crossvit", "B=1 T=5 S=9 D=36 H=3 C:features=24", ("B T C", "B S D")),  # IBM/CrossViT
    ("dit", "B=1 T=16 D=24 H=3", ()),                # facebookresearch/DiT models.py
    ("swin", "B=1 T=24 D=36 H=3", ()),               # microsoft/Swin-Transformer swin_transformer.py
    ("segformer", "B=1 N=16 D=24 H=3", ()),          # transformers SegformerLayer
    ("timm_vit", "B=1 N=16 D=24 H=3", ()),           # timm vision_transformer.py
]


@pytest.mark.parametrize("path,dims,names", VISION_FILES, ids=[p for p, _, _ in VISION_FILES])
def test_correct_vision_files_on_one_image(path, dims, names):
    module = importlib.import_module(f"tests.corpus.vision.{path}")
    torch.manual_seed(0)
    model, inputs = module.build("")
    inputs = _first_entry(inputs)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        for x, name in zip(inputs, names):
            shapetrace.name(x, name)
        model(*inputs)
    assert _findings(t) == []


DECODE_CASES = [c for c in test_decoding.CASES if not c.bug]


@pytest.mark.parametrize("case", DECODE_CASES, ids=[c.id for c in DECODE_CASES])
def test_correct_decode_steps_for_one_prompt(case):
    """tests/corpus/test_decoding.py's correct caches (GPT-2's legacy tuple, transformers' StaticCache and
    DynamicCache, DeepSeek-V2's latent cache; each cites its source) on one prompt: the prefill, then
    one-token steps at B = 1, T = 1."""
    torch.manual_seed(0)
    forward, inputs = case.build()
    inputs = _first_entry(inputs)
    with torch.no_grad(), shapetrace.trace(dims=case.dims.replace("B=2", "B=1")) as t:
        forward(*inputs)
    assert _findings(t) == []


class PositionsFoldedWithHeads(sam_encoder.Attention):
    """segment-anything ``Attention.forward`` with the wrong permute: ``permute(2, 1, 3, 0, 4)`` (3, N,
    heads, B·nW, d_k) for ``permute(2, 0, 3, 1, 4)``, so ``reshape(3, B * heads, H * W, -1)`` folds the
    places inside each window with the heads and spreads the windows over the token axis."""

    def forward(self, x):
        B, H, W, _ = x.shape
        qkv = self.qkv(x).reshape(B, H * W, 3, self.num_heads, -1).permute(2, 1, 3, 0, 4)  # (3, N, heads, B, d_k)
        q, k, v = qkv.reshape(3, B * self.num_heads, H * W, -1).unbind(0)  # (N·heads·?, ?, d_k): wrong
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).view(B, self.num_heads, H, W, -1).permute(0, 2, 3, 1, 4).reshape(B, H, W, -1)
        return self.proj(x)


@pytest.mark.parametrize("dims,fold", [("B=1 Hp=12 Wp=8 D=32 H=2", "!Hp%2*Wp%2*H*Hp/2"),
                                       ("B=3 Hp=12 Wp=8 D=32 H=2", "!Hp%2*Wp%2*H*B*Hp/2")])
def test_places_inside_windows_folded_with_heads_are_a_mix(dims, fold):
    # the twin of SAM's fold: only which window (Hp/2, Wp/2) may sit beside the heads, never a place in one
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    torch.manual_seed(0)
    block = sam_encoder.Block(sizes["D"], sizes["H"]).eval()
    block.attn = PositionsFoldedWithHeads(sizes["D"], sizes["H"]).eval()
    t = _traced(block, torch.randn(sizes["B"], sizes["Hp"], sizes["Wp"], sizes["D"]), dims)
    reshape = next(e for e in t.events if e.op == "reshape" and "B * self.num_heads" in e.code)
    assert reshape.outputs[0].dims == ("qkv", fold, "Wp/2", "d_k")
    assert [d.kind for d in t.diagnostics if d.severity == "error"][0] == "mixed-axis"


# -- picks by index on one image: a replay's indices were bounded by the least size, the batch's 1 ---------

@pytest.mark.parametrize("bug,gathers,errors", [
    ("", [("B", "N[ids_keep]", "D"), ("B", "N[ids_restore]"), ("B", "(N[ids_keep]+12)[ids_restore]", "F")], []),
    ("restore-wrong-axis", [("B", "N[ids_keep]", "D"), ("B", "N[ids_restore]"),
                            ("B", "N[ids_keep]+12", "F[ids_restore]")], ["index-wrong-axis"]),
])
def test_mae_picks_by_index_on_one_image(bug, gathers, errors):
    """facebookresearch/mae ``random_masking`` (``torch.gather(x, dim=1, index=ids_keep...)``) and
    ``forward_decoder``'s unshuffle at B = 1: the element replays drew every index below the least size
    of any axis, the batch's 1, so every index was 0 and no pick was seen: the patches lost their names
    and the unshuffle along the features (``dim=2``) was a silent ``?`` (883cc17). An axis of one entry
    no longer bounds the indices. The decoder's width 36 is ``F`` (its projection's own width, lib13):
    picked along it by the restore indices, ``F[ids_restore]``."""
    torch.manual_seed(0)
    model, inputs = importlib.import_module("tests.corpus.vision.mae").build(bug)
    with torch.no_grad(), shapetrace.trace(dims="B=1 N=16 D=24 H=3") as t:
        model(*_first_entry(inputs))
    assert [e.outputs[0].dims for e in t.events if e.op == "gather"] == gathers
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == errors
