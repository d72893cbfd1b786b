"""Every kind of diagnostic the engine emits: its name, its severity and what it means, in one place.

A rule makes a finding with :meth:`Kind.found` (never a bare string), so the severity comes from
here; the README's table of diagnostics is :func:`readme_table` (a test compares the two), and the
tests' list of kinds is ``set(Kind)``. A kind is a :class:`str` (``Kind.MIXED_AXIS == "mixed-axis"``),
and a :class:`~.diagnostic.Diagnostic` keeps the plain string, so JSON and reprs are unchanged.

>>> Kind.MIXED_AXIS.severity, str(Kind.MIXED_AXIS)
('error', 'mixed-axis')
>>> Kind.SCALE_NOT_HEAD_DIM.found(3, "the scores are scaled by 1/√D.", "Use scores / math.sqrt(d_k).").kind
'scale-not-head-dim'
"""

from __future__ import annotations

from enum import StrEnum

from shapetrace.engine.diagnostic import Diagnostic

#: the severities, worst first
SEVERITIES = ("error", "warning", "note")


#: meanings of :class:`Kind` members written here, to keep the class short
_HEADS_AVERAGED = ("a `mean` over the heads of the heads' attention outputs: one average, right where the model "
                   "means to average its heads (GAT's output layer, `concat=False`), a bug where they are to be laid "
                   "side by side")
_POOLED_PER_HEAD = ("a `mean` over the tokens of the heads' attention outputs, the heads kept apart: a readout per "
                    "head by design, or a slip for a mean over the heads (GAT's `mean(dim=1)` written `mean(dim=0)`): "
                    "`?`, never `✓`")

_NEVER_MIX = ("measured on the values: in code that declares an attention, no output token changes when the other "
              "input tokens do")
_POOLED_MISSES = ("measured on the values: with a causal mask declared, a pooled output does not change when an "
                  "unpadded entry's last token does")


class Kind(StrEnum):
    """One kind of finding: ``(name, severity, one-line meaning[, another severity it may take])``."""

    severity: str
    meaning: str
    also: tuple[str, ...]
    def __new__(cls, value: str, severity: str, meaning: str, also: tuple[str, ...] = ()):
        member = str.__new__(cls, value)
        member._value_ = value
        member.severity, member.meaning, member.also = severity, meaning, also
        return member

    @property
    def rank(self) -> int:
        """How much a finding of this kind explains: :data:`CAUSE`, :data:`EFFECT` or :data:`SYMPTOM`."""
        return _RANKS.get(self, EFFECT)

    def found(self, event: int | None, message: str, fix: str = "", severity: str | None = None,
              blame: tuple[tuple[int, int], ...] = (), also: tuple[int, ...] = ()) -> Diagnostic:
        """A :class:`Diagnostic` of this kind at its severity (or one in ``also``); ``blame``: .rules.causes."""
        return Diagnostic(_severity(self, severity), self.value, event, message, fix, also=also, blame=blame)

    # -- axes mixed or merged ----------------------------------------------------------------------
    MIXED_AXIS = ("mixed-axis", "error", "an axis holds pieces of tokens (or batch entries) mixed with something else")
    ROLL_NOT_UNDONE = ("roll-not-undone", "error",
                       "tokens shifted round by `torch.roll` or reversed by `flip` meet the same tokens unmoved "
                       "(Swin's shifted windows without the roll back; a backward RNN's states not flipped back)")
    TOKENS_MERGED_WITH_FEATURES = ("tokens-merged-with-features", "warning",
        "whole tokens flattened with features (`[B, H, T·d_k]`): fine as a layout exercise, a bug in attention; "
        "an error when a later `linear` projects over that axis", ("error",))
    TOKENS_REGROUPED_WITH_BATCH = ("tokens-regrouped-with-batch", "note",
        "blocks of tokens batched as windows (Swin, local chunks): fine, unless a `view` was meant to go seq-first")
    NONSTANDARD_HEAD_SPLIT = ("nonstandard-head-split", "note",
        "heads split as `view(B, T, d_k, H)`: consistent, so it trains, but pretrained weights would be misread")
    PROJECTION_OVER_TOKENS = ("projection-over-tokens", "error",
                              "a `linear` whose feature axis contains tokens (heads merged without moving them back)")
    NORM_OVER_TOKENS = ("norm-over-tokens", "error", "`nn.LayerNorm(D)` or RMSNorm on a channel-first map (`[B, D, "
        "T]`, `[B, C, H, W]`) whose last axis has D's size by chance: each feature is normalised across positions")

    # -- products and scores -----------------------------------------------------------------------
    ATTENDS_OVER_WRONG_AXIS = ("attends-over-wrong-axis", "error",
        "a matmul batches over tokens and multiplies heads × heads (the `view` bug if `T == H`, or `transpose(0, 1)`)")
    CONTRACTS_DIFFERENT_AXES = ("contracts-different-axes", "error", "a matmul sums over two different axes that "
        "share a size (`q @ k` without `.transpose(-2, -1)` when `T == d_k`)")
    BATCH_MISMATCH = ("batch-mismatch", "error", "a batched matmul lines up unrelated batch axes")
    ATTENDS_OVER_HEADS = ("attends-over-heads", "error", "the scores' key axis is heads (`view(B*T, H, d_k)`)")
    ATTENDS_OVER_BATCH = ("attends-over-batch", "error",
                          "the scores' key axis is batch entries (seq-first code fed `[B, T, D]`)")
    ATTENDS_OVER_FEATURES = ("attends-over-features", "error", "the scores' key axis is features")
    QUERY_KEY_SWAPPED = ("query-key-swapped", "error",
                         "`k @ qᵀ`: the scores' rows are keys (known from the projection modules, or from `S` and `T`)")
    SOFTMAX_WRONG_AXIS = ("softmax-wrong-axis", "error", "softmax over anything but the key axis of the scores")
    STABILISER_WRONG_AXIS = ("stabiliser-wrong-axis", "error", "the max combined into scores before their softmax "
                             "taken along another axis than the softmax's (a shift the softmax does not cancel)")
    KEY_VALUE_SWAPPED = ("key-value-swapped", "error", "scores made from the value projection weighing the key "
                         "projection's output (a `(k, v)` pair read back as `(v, k)`), known from the modules")
    VALUES_BY_QUERIES = ("values-by-queries", "error", "attention weights summed over their query axis (`attnᵀ @ v`)")
    SOFTMAX_OVER_ONE_ENTRY = ("softmax-over-one-entry", "error", "a softmax along an axis of one entry beside a "
                              "token axis (`nn.Softmax(dim=1)` on `(B, 1, L)`): every weight is 1, a plain sum")
    TABLE_CUT_TO_BATCH = ("table-cut-to-batch", "warning", "a table with no batch axis cut to the batch's length "
                          "(`pe[:x.size(0)]` on `[B, T, D]`): each entry gets the row of its place in the batch")
    PICKED_AT_LENGTH = ("picked-at-length", "warning", "`pe[:, x.size(1)]` added to all tokens for `pe[:, :x.size(1)]`")
    SOFTMAX_IMPLICIT_DIM = ("softmax-implicit-dim", "error",
        "softmax called without `dim`, where torch's legacy rule picks an axis that is not the keys "
        "(a note when which axis holds the keys is not known)", ("note",))
    SCALE_NOT_HEAD_DIM = ("scale-not-head-dim", "warning", "the scores' scale is not `1/√d_k`, or changes per call")

    # -- masks, broadcasts and values --------------------------------------------------------------
    MASK_WRONG_AXIS = ("mask-wrong-axis", "error",
                       "a padding mask on the query axis (filled with any large negative, or added), or a mask "
                       "built for another attention: its query or key axis holds another sequence's tokens than "
                       "the scores' (the source padding mask on the decoder's self-attention at S == T)")
    MASK_WRONG_BATCH_ORDER = ("mask-wrong-batch-order", "error",
                              "a mask tiled `H·B` (`repeat(H, 1, 1)`), or a bias folded so (ALiBi transposed "
                              "before its reshape), against scores batched `B·H`")
    BROADCAST_MISMATCH = ("broadcast-mismatch", "error",
        "an elementwise op or mask whose broadcast lines up two named axes of different roles (a `[B, T, T]` "
        "mask on `[B, H, T, T]` scores, a rotary table `[B, T, 1, d_k]` on `[B, H, T, d_k]` at T == H)")
    MASK_HIDES_EVERY_KEY = ("mask-hides-every-key", "error",
                            "a mask that hides every key from every query of a batch entry (an inverted padding "
                            "mask: `mask * min` for `(1 - mask) * min`), so attention there reads nothing it meant to")
    MASK_AFTER_SOFTMAX = ("mask-after-softmax", "error",
                          "a hiding mask laid on probabilities a softmax made, or on scores a softmax already read")
    NAN_ROWS = ("nan-rows", "error", "fully masked rows that any traced softmax or SDPA turns into NaN")
    NAN_ROWS_SKIPPED = ("nan-rows-skipped", "note", "values not read (the meta device has none): NaN rows not checked")

    # -- the kernels' contracts --------------------------------------------------------------------
    SDPA_LAYOUT = ("sdpa-layout", "error",
                   "`F.scaled_dot_product_attention` fed q, k, v as `[B, T, H, d]` where `[B, H, T, d]` is due")
    CAUSAL_MASK_MISALIGNED = ("causal-mask-misaligned", "error", "a causal mask aligned otherwise than the "
                              "queries' positions among the keys (`is_causal=True` at L < S; `triu(1)` past a prefix)")
    MASK_POLARITY = ("mask-polarity", "error",
                     "a boolean mask in nn.MultiheadAttention's polarity (True = masked) given to SDPA")
    MASK_POLARITY_UNCHECKED = ("mask-polarity-unchecked", "note",
        "a boolean mask given to SDPA whose values were not read, so its polarity was not checked")
    FLOAT_MASK_AS_BIAS = ("float-mask-as-bias", "error",
                          "a float mask of 0s and 1s, which SDPA adds to the scores and so hides nothing")
    GQA_HEADS_MISMATCH = ("gqa-heads-mismatch", "error", "heads that `enable_gqa` cannot pair")
    GQA_HEADS_ALREADY_REPEATED = ("gqa-heads-already-repeated", "note",
        "`enable_gqa=True` with keys that already have as many heads as the queries: nothing is shared")
    GQA_HEAD_ORDER = ("gqa-head-order", "error", "key/value heads tiled with `repeat(1, n_rep, 1, 1)` meeting "
                      "queries whose head h reads key/value head h // n_rep")

    SCAN_OVER_WRONG_AXIS = ("scan-over-wrong-axis", "error",
                            "a running sum or product (`cumsum`, `cumprod`) along the heads, the batch or a head's "
                            "features, which carries one head's, sequence's or feature's values into the next")
    REDUCTION_OVER_WRONG_AXIS = ("reduction-over-wrong-axis", "error",
        "a reduction (`sum`, `mean`, `max`, `norm`, `F.normalize`...) along the heads or the batch of per-head values, "
        "or of scores that then weigh the values (a note where it runs over the keys too: one scale)", ("note",))
    HEADS_AVERAGED = ("heads-averaged", "warning", _HEADS_AVERAGED)
    NORMALISED_OVER_TOKENS = ("normalised-over-tokens", "warning", "`F.normalize` of per-head vectors, or a norm's "
                              "statistic read back on the tokens, taken along the tokens: each token's vector is "
                              "scaled by a norm over the whole sequence, so it depends on the other tokens")
    POOLED_OVER_PADDING = ("pooled-over-padding", "warning", "a `mean` over a padded batch's tokens, padding included")
    KEYS_CHANGE_SEQUENCE = ("keys-change-sequence", "warning",
        "the scores made on one line of one module hold keys of one sequence at one call and of another at a "
        "later call (a cross-attention handed the decoder's own cache at a decoding step)")
    POSITIONS_ACROSS_SEQUENCES = ("positions-across-sequences", "warning", "a bias read from a table at pairs of "
                                  "places of two sequences onto their cross-attention (T5's takes no position bias)")
    NORMALISED_ACROSS_THE_PRODUCT = ("normalised-across-the-product", "warning", "`F.normalize` of per-head vectors "
        "along their features where the product that reads them sums over the tokens (cross-covariance attention, "
        "XCiT): the cosine is taken across the rows that product compares, not along them")

    DISTANCE_BIAS_REVERSED = ("distance-bias-reversed", "error",
        "a position bias on the scores that grows linearly with the distance between query and key in every "
        "head (ALiBi with its sign reversed): each query favours the farthest keys")
    CAUSAL_MASK_REVERSED = ("causal-mask-reversed", "error",
                            "a mask that hides exactly the keys before each query and keeps those after it")
    CACHED_CHUNK_UNMASKED = ("cached-chunk-unmasked", "warning", "new queries scored unmasked on a growing KV cache")
    CAUSAL_MASK_HIDES_ITSELF = ("causal-mask-hides-itself", "error",
                                "a causal mask that hides each query's own key too (`triu(0)` for `triu(1)`): "
                                "no token sees itself and the first sees nothing")
    MASK_HIDES_OWN_KEY = ("mask-hides-own-key", "note", "a mask on the scores of one sequence that hides a "
                          "query's own key while it sees others and others see that key: a window hidden instead of "
                          "its outside, a chunk id `j % C`, or by design (XLNet's query stream)")
    MASK_SHOWS_PADDING = ("mask-shows-padding", "warning", "a mask that shows a padded key to a real query")
    NORM_ACROSS_HEADS = ("norm-across-heads", "note", "a norm over the heads and their features together "
                         "(`rms_norm(q, (H, d_k))`): one norm over D as OLMo 2's, or a per-head norm widened by a slip")
    QK_NORM_ONE_SIDED = ("qk-norm-one-sided", "note", "a norm on the queries' path or the keys' and not on the "
                         "other's before their scores (a qk-norm given to the wrong operand, or one side by design)")
    MASK_KEEPS_FUTURE = ("mask-keeps-future", "error", "a mask on the scores of one sequence that hides keys far "
                         "before a query but no key after any: a causal sliding window that lost its causal half "
                         "(`j > i - w` without `j <= i`), so each query sees every later token")
    CAUSAL_MASK_UNDONE = ("causal-mask-undone", "warning", "a causal triangle the code built, combined into a mask "
                          "that hides no key of some batch entry (padding or-ed with the triangle, for `&`)")
    MASK_KEEPS_FAR_FUTURE = ("mask-keeps-far-future", "error", "a mask on the scores of one sequence that hides the "
                             "few keys just after each query and sees all beyond them (`tril(causal, diagonal=w)`)")
    MASK_SKIPS_AHEAD = ("mask-skips-ahead", "warning", "a causal mask that opens a later key across a hidden one")
    WINDOW_WIDENS = ("window-widens", "error", "a sliding-window mask made on one line that keeps w keys per query "
                     "at one call and lets a query see more at a later one (its edge not moved with the cache)")
    CAUSAL_MASK_ACROSS_SEQUENCES = ("causal-mask-across-sequences", "error", "a causal mask cut from a square "
        "table over one sequence given to scores whose keys are another sequence than its queries (a decoder's mask "
        "reused in its cross-attention); a warning where built from the two lengths (wait-k aligns so)", ("warning",))
    BIAS_CONSTANT_ALONG_KEYS = ("bias-constant-along-keys", "warning",
        "a bias on the scores that is the same on every key each query may see while it changes along the "
        "queries: softmax takes it away, so it does nothing (a position bias laid along the queries)")
    DIRECTION_UNCHECKED = ("direction-unchecked", "note",
        "a mask or bias onto the scores whose values were not read (another device, too large, the meta "
        "device), so which keys it hides or favours was not checked")
    HEADS_MIXED_BY_MATRIX = ("heads-mixed-by-matrix", "note",
        "the heads of the scores summed against a learned matrix over the heads (talking-heads attention, "
        "`einsum('b h i j, h k -> b k i j', dots, W)`): each new head mixes every head on purpose, so the heads "
        "after it are named by nothing and not checked by name")
    ATTENDS_OVER_CHANNELS = ("attends-over-channels", "note",
        "a softmax over the features of a feature-by-feature product that summed over the tokens, whose weights "
        "then mix each token's features of the values (cross-covariance attention, XCiT's `XCA`): attention "
        "over channels by design, or q, k and v all permuted by one slip; which, the run cannot say: unchecked")
    MASK_LOOKS_AHEAD = ("mask-looks-ahead", "note",
        "a mask on the scores that hides the keys more than a few places after each query and keeps the nearer "
        "ones (`tril(ones, diagonal=1)` for `tril(ones)`): a causal mask off its diagonal, or a look-ahead window "
        "by design; the values cannot say which, so the verdict does not claim the mask was checked")
    POSITIONS_SHARED_OVER_PADDING = ("positions-shared-over-padding", "note",
        "a table looked up by one row of positions shared by every batch entry (`arange(T)[None]`) while the model "
        "was given a mask with a row padded in front: that row's real tokens read other positions than an unpadded "
        "row's (learned absolute positions shifted by the padding, `cumsum(mask) - 1` meant), unless by design")
    CAUSAL_OVER_PACKED_ROWS = ("causal-over-packed-rows", "warning", "an attention whose mask hides the future keys "
        "and nothing else while the model was given positions that restart at 0 inside a row (sequences packed in "
        "one, `[0, 1, 2, 0, 1]`): each packed sequence reads the ones before it in its row")
    IDS_READ_BY_TWO_TABLES = ("ids-read-by-two-tables", "note",
        "one ids tensor looks up two tables whose rows are then added (`position_embeddings(token_type_ids)` beside "
        "`token_type_embeddings(token_type_ids)`): two such tables are one table of their sums, so one of them was "
        "likely meant to read other ids (positions); which ids each table takes is not checked")
    WINDOW_WIDTH_UNCHECKED = ("window-width-unchecked", "note",
        "a mask keeps a window of `w` keys per query (read on its values) that no window attribute of the model holds "
        "(`sliding_window = 3` for 4 keys: `>` for `>=`), or a window it holds is applied by no mask over more keys "
        "(hippogriff's `window_size=(-w, 0)`): which width the model meant is its configuration's, so it is unchecked")
    CAUSAL_DECLARED_UNMASKED = ("causal-declared-unmasked", "note", "a module declares itself causal (`is_decoder "
        "= True`, `config.is_causal`) and its self-attention over several queries applies no causal mask")
    MASK_UNEXERCISED = ("mask-unexercised", "note",
        "a mask that hid nothing on this input (nothing padded) and whose layout and names do not prove that it lines "
        "up with the keys: a mask laid on the queries would give the same output, so where it lands was not checked")
    BATCH_PICKED = ("batch-picked", "note", "an op picks one entry of a batch of several and drops the others "
                    "for good (`x[0]` for `x[:, 0]`): one entry's result stands for all, and the batch contract "
                    "cannot be measured")
    BATCH_REDUCED = ("batch-reduced", "note",
                     "a reduction over a batch of several that keeps each token's or feature's axis (`x.mean(0)` "
                     "for `x.mean(1)`): every entry mixed into one, and the batch contract cannot be measured")
    POOLED_PER_HEAD = ("pooled-per-head", "note", _POOLED_PER_HEAD)
    INPUT_UNREAD = ("input-unread", "note", "a tensor the model was given that no tensor op read (a padding mask "
                    "never passed on; or read only as Python numbers, `tolist()`): what it changed was not checked")
    POOLED_READ_UNMEASURED = ("pooled-read-unmeasured", "note", "a causal model's pooled output (no token axis) "
                              "whose token, picked by values (a mask's count), was not measured: `?`, never `✓`")
    LENGTHS_UNMEASURED = ("lengths-unmeasured", "note", "a padding mask the model builds from lengths it was given "
                          "(one per batch entry), its pads not measured unread: `?`, never `✓`")
    POSITIONS_GROUPED = ("positions-grouped", "note", "a mask of positions grouped by `//` or `%`: groups unchecked")
    PROJECTION_BYPASSED = ("projection-bypassed", "warning", "a projection computed that reaches nothing returned "
                           "while the tensor it projected went on in its place (`out = proj(x); return x`)")
    BATCH_UNEXERCISED = ("batch-unexercised", "note",
        "a view given a size read from an axis of one entry (the batch at B = 1) puts that entry on the other side "
        "of other axes' elements than memory holds it: at one entry it holds the same elements either way, at more "
        "it would regroup them, so the run could not check it")

    ROTARY_PAIRING_DECLARED = ("rotary-pairing-declared", "warning", "a rotary pairing features by halves while a "
        "module says interleaved (`is_neox_style`, `interleaved`, `config.rotary_interleaved`), or the other way round")
    ROTARY_PAIRING_MISMATCH = ("rotary-pairing-mismatch", "error", "a rotary table laid out for another pairing "
        "than its rotation's (an interleaved table, `repeat_interleave(2)`, under `rotate_half`; a halves table, "
        "`cat([f, f])`, under `rotate_every_two`): each pair is turned by two different angles")
    INDEX_WRONG_AXIS = ("index-wrong-axis", "error",
        "a `gather` / `index_select` / `take_along_dim` that picks along one axis with indices that count "
        "another axis of the same tensor (made by `argsort`, `argmax` or `arange` along it)")
    ROTARY_SAME_ANGLE_EVERY_TOKEN = (
        "rotary-same-angle-every-token", "error",
        "a rotary embedding that turns every token of a sequence by the same angles (positions counted along "
        "the batch or another axis than the tokens): q·k cancels equal rotations, so the scores get no position")
    ROTARY_POSITION_RESTARTS = ("rotary-position-restarts", "error",
        "a rotation at position 0 (cos 1, sin 0) joined after other tokens, as a key appended to a KV cache "
        "whose positions start again at 0 each step instead of at the cache's length")
    POSITIONS_RESTART = ("positions-restart", "error", "a decode step put at the first positions again, after a cache")
    ROTARY_POSITION_OFF = ("rotary-position-off", "error",
        "a decode step's token turned by another position than the one it takes: a key joined after n cached "
        "keys not at position n, or a query meeting S keys not at position S - 1")
    ROTARY_GRID_POSITIONS = ("rotary-grid-positions", "note", "a rotary of several positions per token (rows "
                             "and columns, in separate features): which grid position each token takes is not read")
    ROTARY_PAIRING_UNCHECKED = ("rotary-pairing-unchecked", "note", "a rotary embedding whose table values were not "
        "read (another device, too large, the meta device, a table of the rotated tensor's shape): pairing unchecked")
    ROTARY_ONE_SIDED = ("rotary-one-sided", "warning", "scores of queries against keys of which only one side was "
        "turned by a rotary table on its way from its projection: the scores keep that side's absolute positions")

    # -- measured on the values (engine/dependencies.py) ---------------------------------------------
    BATCH_ENTRIES_MIX = ("batch-entries-mix", "error",
                         "measured on the values: an output of one batch entry depends on another entry's tokens")
    BATCH_PLACE_MATTERS = ("batch-place-matters", "error",
                           "measured on the values: one sequence gives another output at another place in the batch")
    TOKEN_IGNORES_ITSELF = ("token-ignores-itself", "error",
                            "measured on the values: an output token does not change when its own input token does")
    CAUSAL_MASK_LEAKS = ("causal-mask-leaks", "error", "measured on the values: with a causal mask declared, an "
                         "output token depends on a later token")
    TOKENS_NEVER_MIX = ("tokens-never-mix", "error", _NEVER_MIX)
    POOLED_MISSES_LAST_TOKEN = ("pooled-misses-last-token", "error", _POOLED_MISSES)
    PADDING_READ = ("padding-read", "error", "measured on the values: the output at a real token of a padded batch "
                    "entry (or its pooled output) changes when only the padding of that entry changes", ("warning",))
    HEADS_MIX = ("heads-mix", "error", "measured on the values: an output head depends on another head's values, "
                 "on a key/value head other than the one its query reads, or on different heads at different positions")
    HEADS_TALK = ("heads-talk", "warning", "measured on the values: an output head's attention weights depend on "
                  "other heads' queries or keys (talking-heads attention does this on purpose)")

    # -- writes, joins and views -------------------------------------------------------------------
    WRITE_MISMATCH = ("write-mismatch", "error", "a cache written (`cache[:, :, s:e] = k`, `index_copy_`, "
                      "`copy_`) with its axes in another order than it is read")
    CACHE_SLOT_SKIPPED = ("cache-slot-skipped", "error",
                          "a cache read back in a slice that takes a slot this run never wrote, after slots it "
                          "did write: a step's keys or values written at the wrong position")
    JOIN_MISMATCH = ("join-mismatch", "error", "a `cat` that lines up different axes of equal size in its parts")
    FUSED_PART_TAKEN_TWICE = ("fused-part-taken-twice", "error", "a fused q/k/v projection's part taken twice "
                              "while another part is never read (the keys reused as the values)")
    PROJECTIONS_JOINED = ("projections-joined", "warning", "a `cat` along the tokens of parts made by two of the q, k "
                          "and v projections (patch keys from the queries' projection: a line copied from the q one)")
    CAT_SIZES_MISMATCH = ("cat-sizes-mismatch", "error",
                          "a `cat` whose parts differ in size along an axis it does not join")
    VIEW_INCOMPATIBLE = ("view-incompatible", "error", "a `view` that cannot work on these strides")

    # -- the backward pass (engine/backward/checks.py) ---------------------------------------------
    INPLACE_ON_SAVED = ("inplace-on-saved", "error",
        "an in-place op (`masked_fill_`, `+=`, `x[...] = `) wrote into a tensor autograd saved for the backward: "
        "the backward fails with \"modified by an inplace operation\"; said before it runs, with the write")
    PARAMETER_WITHOUT_GRAD = ("parameter-without-grad", "warning",
        "a parameter that requires grad gets no gradient from the backward, with the call that took it out of "
        "autograd's graph (a `.detach()`, a `torch.no_grad()` block, `.data`)")
    GRAD_NOT_CONTIGUOUS = ("grad-not-contiguous", "warning",
        "a parameter's gradient is not contiguous (a transposed parameter, or a gradient assigned with other "
        "strides): `.grad.view(-1)` fails and code that flattens gradients copies it at every step")
    GRAD_DTYPE_MISMATCH = ("grad-dtype-mismatch", "warning",
        "a parameter's `.grad` has another dtype than the parameter (its `.data` was cast after a backward)")

    # -- about the trace itself --------------------------------------------------------------------
    DIMS_DISAGREE = ("dims-disagree", "note",
        "the sizes given (`--dims H=8`) disagree with the code (a view splits D into 4 × 16): said once, under "
        "the verdict, as a question about the sizes, never as a claim about the model")
    AMBIGUOUS_SIZES = ("ambiguous-sizes", "note",
        "a name was chosen between two declared names of equal size (`[4, 4, D]` at B = T = 4: `[B, T, D]` or "
        "`[T, B, D]`) and no use settled it: name the input with `shapetrace.name(x, \"B T D\")`")
    ORDER_OF_EQUAL_SIZES = ("order-of-equal-sizes", "note",
        "an input fits more than one order of equal sizes (`[T, B, D]` read `[B, T, D]` at B = T) and a finding "
        "of one reading is not found in another: the names rest on that order, so it is not reported")
    INFERENCE_FAILED = ("inference-failed", "note",
        "a fault of shapetrace itself on this code: that op's results are left unnamed (every other op is "
        "still named and checked); `SHAPETRACE_STRICT=1` raises it instead")
    CHECK_FAILED = ("check-failed", "note",
                    "a fault of shapetrace itself: one check did not run on this code; `SHAPETRACE_STRICT=1` raises it")


def _severity(kind: Kind, severity: str | None) -> str:
    """``severity`` where ``kind`` may take it (its own or one in ``also``), ``kind``'s own where None; else
    ValueError."""
    chosen = severity or kind.severity
    if chosen != kind.severity and chosen not in kind.also:
        raise ValueError(f"{kind.value} is never {chosen!r} (it is {kind.severity!r})")
    return chosen


#: The ranking of what a kind explains, highest first. A *cause* names the op that made a wrong layout and
#: the fix there (a view that mixes tokens, a repeat that tiles kv heads, a write laid out otherwise than
#: its buffer); an *effect* says what a wrong layout breaks where it is used (scores over heads, a
#: projection over tokens); a *symptom* only says that two operands disagree (which one is wrong, it
#: cannot tell). Where findings blame the same layout, the one that explains most is kept
#: (:mod:`.rules.causes`): a symptom never stands beside the cause that explains it.
CAUSE, EFFECT, SYMPTOM = 2, 1, 0
_RANKS = {
    Kind.MIXED_AXIS: CAUSE, Kind.TOKENS_MERGED_WITH_FEATURES: CAUSE, Kind.GQA_HEAD_ORDER: CAUSE,
    Kind.MASK_WRONG_BATCH_ORDER: CAUSE, Kind.WRITE_MISMATCH: CAUSE, Kind.VIEW_INCOMPATIBLE: CAUSE,
    Kind.BATCH_MISMATCH: SYMPTOM, Kind.BROADCAST_MISMATCH: SYMPTOM, Kind.JOIN_MISMATCH: SYMPTOM,
    Kind.BATCH_ENTRIES_MIX: SYMPTOM, Kind.BATCH_PLACE_MATTERS: SYMPTOM, Kind.TOKEN_IGNORES_ITSELF: SYMPTOM,
    Kind.CAUSAL_MASK_LEAKS: SYMPTOM, Kind.POOLED_MISSES_LAST_TOKEN: SYMPTOM, Kind.TOKENS_NEVER_MIX: SYMPTOM,
}


def severity_text(kind: Kind) -> str:
    """``error``, or ``warning / error`` for a kind that may take another severity."""
    return " / ".join((kind.severity, *kind.also))


def readme_table() -> str:
    """The README's table of diagnostics, one row per kind, errors first (in this enum's order within)."""
    rows = sorted(Kind, key=lambda k: SEVERITIES.index(k.severity))
    lines = ["| kind | severity | what it means |", "|---|---|---|"]
    lines += [f"| `{k.value}` | {severity_text(k)} | {k.meaning} |" for k in rows]
    return "\n".join(lines)
