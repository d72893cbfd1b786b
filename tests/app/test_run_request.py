"""RunRequest: ``run``'s options as one frozen request, its defaults in one place, validated once."""

from __future__ import annotations

import dataclasses

import pytest
import typer

from shapetrace.app.classroom import ClassroomRequest, ViewOptions
from shapetrace.app.request import MODEL, RunRequest
from shapetrace.attention.config import AttentionConfig
from shapetrace.attention.memory import reference_bytes, variant_bytes
from shapetrace.cli.app import app
from shapetrace.errors import UsageError


def run_params() -> dict:
    """``run``'s click parameters by name."""
    return {p.name: p for p in typer.main.get_command(app).commands["run"].params}


def defaults_of(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_typer_defaults_are_the_dataclass_defaults():
    own = {**defaults_of(ViewOptions), **defaults_of(ClassroomRequest), **defaults_of(RunRequest)}
    as_typed = {"all_ops": not ViewOptions.fold, "predict": False, "predict_what": None, "traceback": False,
                "ops": None}
    params = run_params()
    for name, param in params.items():
        assert param.default == as_typed.get(name, own.get(name)), name
    assert {n for n in params if n not in own} == {"all_ops", "predict_what", "traceback"}


def test_model_and_variant_defaults_are_attention_configs():
    config_defaults = defaults_of(AttentionConfig)
    for name, value in defaults_of(RunRequest).items():
        if name in config_defaults and name != "pad":
            assert value == config_defaults[name], name
    assert RunRequest().config == MODEL == AttentionConfig()


def test_the_parsed_defaults_make_the_default_request():
    options = {name: p.default for name, p in run_params().items()}
    request = RunRequest.from_options(options)
    assert request == RunRequest() and not request.is_variant
    assert request.estimate == reference_bytes(AttentionConfig())


@pytest.mark.parametrize("request_, message", [
    (RunRequest(heads=7), "7 does not divide 512: --heads must divide --d-model (d_k = D / H); heads that divide "
                          "512 near 7: 4, 8"),
    (RunRequest(max_memory="x"), "cannot read --max-memory 'x': write a size such as 1GiB, 512MiB or 2GB"),
    (RunRequest(mask="padding", pad="x"), "cannot read --pad 'x': give one whole number of padding tokens per "
                                          "sequence, separated by commas (e.g. --pad 0,2)"),
    (RunRequest(image=32, patch=8, typed=frozenset({"seq_len"})),
     "--seq-len cannot be combined with --image: the tokens are the image's patches and a class token (1+N, "
     "from --image and --patch)"),
    (RunRequest(kv_heads=3), "--kv-heads 3 must divide --heads 8: each key/value head serves heads / kv_heads "
                             "query heads, a whole number. Values that work: 1, 2, 4, 8 (1 = multi-query "
                             "attention)"),
])
def test_checked_names_the_bad_option(request_, message):
    with pytest.raises(UsageError) as err:
        request_.checked()
    assert str(err.value) == message


@pytest.mark.parametrize("options, message", [
    (dict(json_out=True, step=True), "--json prints only the JSON trace: use it without --step, --predict or "
                                     "--export"),
    (dict(explain="x"), "--explain 'x': choose one of full, brief"),
    (dict(width=20), "--width 20: use 40 to 1000 columns"),
    (dict(ops="3-5"), "--ops FIRST-LAST only works with --export PATH (a range of ops for a slide)"),
    (dict(auto=1.0), "--auto SECONDS only works with --step"),
])
def test_classroom_checks_take_keywords(options, message):
    with pytest.raises(UsageError) as err:
        ClassroomRequest.checked(**options)
    assert str(err.value) == message


def test_classroom_checked_keeps_the_defaults_it_is_not_given():
    request = ClassroomRequest.checked(width=80, all_ops=True)
    assert request == ClassroomRequest(view=ViewOptions(width=80, fold=False))


def test_break_list_needs_no_other_check():
    request = RunRequest(broken="list", heads=7).checked()
    assert request.lists_catalogue and request.is_variant


def test_preset_returns_a_new_request_and_keeps_typed_sizes():
    typed = RunRequest(preset="llama3-8b", heads=16, typed=frozenset({"heads"}))
    filled = typed.with_preset()
    assert filled is not typed and (typed.d_model, typed.heads) == (512, 16)  # the original is unchanged
    assert (filled.d_model, filled.heads, filled.kv_heads) == (4096, 16, None)  # H_kv only when nothing is typed
    assert "(your --heads kept)" in filled.preset_note
    plain = RunRequest(preset="llama3-8b").checked()
    assert (plain.d_model, plain.heads, plain.kv_heads) == (4096, 32, 8)
    assert plain.preset_note.endswith("This run uses T=6; pass --seq-len 8192 for the full context. llama3-8b has "
                                      "no biases in its attention projections; the model traced here has "
                                      "10,240, so its 41,953,280 parameters are 41,943,040 in llama3-8b.")
    assert plain.config.d_k == 128


def test_preset_sizes_are_applied_before_the_sizes_are_checked():
    # 1024 heads do not fit the default D=512, but do fit the preset's D=8192
    request = RunRequest(preset="llama3-70b", heads=1024, typed=frozenset({"heads"})).checked()
    assert (request.config.d_model, request.config.heads) == (8192, 1024)


def test_a_variant_estimate_uses_the_forced_config():
    request = RunRequest(broken="no-key-transpose").checked()
    forced = dataclasses.replace(request.config, seq_len=request.config.d_k)   # the break runs with T = d_k
    assert request.estimate == variant_bytes(forced) != variant_bytes(request.config)
