"""A twelfth round of public-style files (tests/corpus/public12: vision, speech, encoder-decoder and library code,
each citing its source), traced at distinct sizes and at B = T = H = 4, first sight recorded before any fix.

First sight (``round_outcome``: no dependency contracts; distinct sizes | B = T = H = 4), on 1123aec (main):

===================  ======================  ======================================  ===============================
file                 variant                 distinct (DIMS)                         B=T=H=4
===================  ======================  ======================================  ===============================
eva_rope             (correct)               ? 27 of 28 (#0 expand: the class token) ?
eva_rope             rotate-half             ✗ rotary-pairing-mismatch               ✗ rotary-pairing-mismatch
eva_rope             class-token-last        ✗ contracts-different-axes              ✗ contracts-different-axes
torchvision_vit      (correct)               ? 34 of 35 (#3 expand: the class token) ?
torchvision_vit      patches-no-permute      ✗ mixed-axis, projection-over-tokens    ✗ tokens-merged-with-features, …
wav2vec2             (correct)               ? 4 of 26                               ?
wav2vec2             fold-no-transpose       ✗ projection-over-tokens                ✗ projection-over-tokens
xcit                 (correct)               ✗ attends-over-features, normalised-    ✗ attends-over-features (false)
                                             over-tokens ×2 (false)
xcit                 normalize-channels      ✗ attends-over-features                 ✗ attends-over-features
levit                (correct)               ? 2 of 14                               ? 0 of 14
levit                merge-no-transpose      ✗ mixed-axis                            ✗ projection-over-tokens
beit_relpos          (correct)               ? 12 of 20                              ? 0 of 20
beit_relpos          bias-view-heads-first   ✗ mixed-axis                            ?
whisper_cross_cache  (correct)               ? 44 of 67 (the decoding step unnamed)  ?
whisper_cross_cache  cross-reads-self-cache  ? 44 of 67                              ?
torch_transformer    (correct)               ? 85 of 87 (#63, #64 split)             ?
torch_transformer    keep-mask               ? 88 of 90                              ?
===================  ======================  ======================================  ===============================

At distinct sizes the 8 correct files were ✓ 0, ? 7, ✗ 1 (XCiT, false); the 9 bugs ✗ 7 (XCiT's only by the false
error), ? 2, ✓ 0. ``shapetrace trace`` (dependency contracts measured) differed: nn.Transformer's correct file was
``✗ causal-mask-leaks`` (false: the source's S frames compared token by token with the target's T) and its bug
``✗ token-ignores-itself, causal-mask-leaks`` (found for the same wrong reason).

The fixes, one general mechanism each (tests in the engine's modules say what each fixes): a softmax over the
features of a d x d product whose weights then mix each token's value features is attention over channels, a note
that leaves ``?`` (``rules/channels``; and ``F.normalize`` is judged against the axis the product reading it sums
over: XCiT's over-the-tokens is right, its bug's over-the-channels a ``normalised-across-the-product`` warning); a
join names its parts from one another (``infer/backward.joined_names``: the class token's ``expand``); a decoding
step's ``[B, 1, D]`` input is seeded (``infer/seeds``), and a line whose first call was a cross-attention that
later reads keys of another sequence is a warning (``rules/key_sequences``: without it, seeding the step would have
given Whisper's bug a ``✓``); the token contracts are not measured where the perturbed input's tokens are another
sequence than the output's (``dependencies``, ``probe_inputs.other_sequence``); SDPA's ``attn_mask`` hiding each
query's past and itself is a reversed causal mask, as on masked_fill (``rules/directions``).

Now at distinct sizes: correct ✓ 3 (EVA, torchvision ViT, Whisper), ? 5, ✗ 0; bugs ✗ 7, ! 2 (XCiT's normalisation,
Whisper's cache), ? 0, ✓ 0 (nn.Transformer's keep-mask, a boolean ``tgt_mask`` in the Hugging Face sense handed to
torch, reaches SDPA hiding each query's past and itself: ``rules/directions`` now reads that on SDPA's
``attn_mask`` as it did on masked_fill). What stays ``?`` on correct code: wav2vec2 (a projection from the conv
encoder's channels, which no name reaches: ``linear`` names no width from unnamed features), LeViT (keys narrower
than values, ``split([16, 16, 32])`` of an unnamed ``4·D`` projection), BEiT (the relative bias gathered through an
index table, ``[1, H, 10, 10]``, which nothing names: which of its axes is the query's is not proven),
nn.Transformer (torch's ``_in_projection_packed`` splits of the fused weight), XCiT (attention over channels:
design or slip). At B = T = H = 4 what stays ``?`` rests on names found from sizes alone."""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.public12 import (
    beit_relpos,
    eva_rope,
    levit,
    torch_transformer,
    torchvision_vit,
    wav2vec2,
    whisper_cross_cache,
    xcit,
)

MODULES = (eva_rope, torchvision_vit, wav2vec2, xcit, levit, beit_relpos, whisper_cross_cache, torch_transformer)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (eva_rope, ""): [UNSURE, UNSURE],   # (✓ until stop 52: a 2-D rotary's grid positions are not read)
    (eva_rope, "rotate-half"): [("✗", ("rotary-pairing-mismatch",))] * 2,
    # (r17: the attention output, its tokens in the order T+1, added back onto the residual's 1+T is
    # broadcast-mismatch too, namer's reordered joins)
    (eva_rope, "class-token-last"): [("✗", ("contracts-different-axes", "broadcast-mismatch"))] * 2,
    (torchvision_vit, ""): [OK, OK],
    (torchvision_vit, "patches-no-permute"): [("✗", ("mixed-axis", "projection-over-tokens")),
                                              ("✗", ("tokens-merged-with-features", "projection-over-tokens"))],
    (wav2vec2, ""): [UNSURE, UNSURE],
    # (the view that folds batch into the heads is a mix now named, since 1c7ffc9: mixed-axis there, and again at
    # the view that cuts that mix, which hides the projection-over-tokens behind it as "also seen")
    # (two mixed-axis at DIMS until 48917dd: the second on a view of the first's mix, folded into it since)
    (wav2vec2, "fold-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("projection-over-tokens",))],
    (xcit, ""): [UNSURE, UNSURE],
    (xcit, "normalize-channels"): [("!", ("normalised-across-the-product",) * 2), UNSURE],
    (levit, ""): [UNSURE, UNSURE],
    (levit, "merge-no-transpose"): [("✗", ("mixed-axis",)), ("✗", ("projection-over-tokens",))],
    (beit_relpos, ""): [UNSURE, UNSURE],
    (beit_relpos, "bias-view-heads-first"): [("✗", ("mixed-axis",)), UNSURE],
    (whisper_cross_cache, ""): [OK, UNSURE],
    # (lib14: the cross-attention's own k/v projections, read and then dropped, are projection-bypassed; at equal
    # sizes keys-change-sequence rests on the order of B = T = 4 and is left out beside those proven warnings)
    (whisper_cross_cache, "cross-reads-self-cache"): [
        ("!", ("projection-bypassed", "projection-bypassed", "keys-change-sequence")),
        ("!", ("projection-bypassed", "projection-bypassed"))],
    (torch_transformer, ""): [OK, UNSURE],   # (✓ since ops on parameters alone no longer count: the weight split)
    (torch_transformer, "keep-mask"): [("✗", ("causal-mask-reversed",))] * 2,
}


test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)
