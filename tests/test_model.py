"""xlt.model: sharing presets, parameter counts, padding, attention and MLM loss against textbook versions."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from xlt.model import MODEL_PRESETS, SHARING_PRESETS, EncoderConfig, MaskedLM, SharingSpec
from xlt.model.encoder import SelfAttention, for_language
from xlt.utils.errors import XltError

V, LANGS = 50, ["en", "fr"]


def tiny(sharing="default", languages=LANGS, **overrides) -> EncoderConfig:
    # 7 layers so that every Table 1 preset (up to L1-6, top layer shared) is valid.
    return EncoderConfig.preset("tiny", vocab_size=V, languages=languages, sharing=sharing,
                                **{"n_layers": 7, **overrides})


def model(config: EncoderConfig, seed: int = 0) -> MaskedLM:
    torch.manual_seed(seed)
    return MaskedLM(config)


def layer_params(D: int, F_: int) -> int:
    # qkv (3D^2 + 3D) + out (D^2 + D) + two LayerNorms (4D) + FFN (2*D*F + F + D)
    return 4 * D * D + 2 * D * F_ + 9 * D + F_


def test_parameter_count_tiny_default_by_hand():
    cfg = EncoderConfig.preset("tiny", vocab_size=V, languages=LANGS)
    D, F_, P, L = 64, 128, 512, 2
    embeddings = V * D + P * D + len(LANGS) * D + 2 * D
    head = V  # XLM's prediction layer: the tied table plus a bias
    assert model(cfg).count_parameters() == embeddings + L * layer_params(D, F_) + head == 103_218


def test_parameter_count_wu2020_default_by_hand():
    cfg = EncoderConfig.preset("wu2020", vocab_size=80_000, languages=LANGS)
    with torch.device("meta"):
        m = MaskedLM(cfg)
    D, F_, P, L = 768, 3072, 512, 8
    embeddings = 80_000 * D + P * D + 2 * D + 2 * D
    head = 80_000
    assert layer_params(D, F_) == 7_087_872
    assert m.count_parameters() == embeddings + L * layer_params(D, F_) + head == 118_619_264


@pytest.mark.parametrize("preset", list(SHARING_PRESETS))
def test_sharing_preset_has_the_parameters_it_should(preset):
    cfg = tiny(preset)
    spec, D, L = cfg.sharing, cfg.d_model, cfg.n_layers
    m = model(cfg)
    n_separate_layers = 0 if spec.separate_layers is None else spec.separate_layers[1]
    per_lang_expected = n_separate_layers * layer_params(D, cfg.d_ffn)
    if spec.separate_embeddings:
        per_lang_expected += V * D + cfg.max_positions * D + V  # tokens, positions, output bias

    names = {}
    for lang in LANGS:
        specific = dict(m.language_specific_parameters(lang))
        assert all(f"by_lang.{lang}." in n for n in specific)
        assert sum(p.numel() for p in specific.values()) == per_lang_expected
        names[lang] = {n.replace(f"by_lang.{lang}.", "by_lang.*.") for n in specific}
    assert names["en"] == names["fr"]
    shared_total = m.count_parameters() - len(LANGS) * per_lang_expected
    assert shared_total == sum(p.numel() for n, p in m.named_parameters() if ".by_lang." not in n)

    # Which module each language actually runs: the same object when shared, distinct copies otherwise.
    enc = m.encoder
    for number in range(1, L + 1):
        en, fr = (for_language(enc.layers[number - 1], lang) for lang in LANGS)
        assert (en is not fr) == (1 <= number <= n_separate_layers)
    en_emb, fr_emb = (enc.token_embedding_weight(lang) for lang in LANGS)
    assert (en_emb.data_ptr() != fr_emb.data_ptr()) == spec.separate_embeddings
    en_pos, fr_pos = (for_language(enc.position_embeddings, lang).weight for lang in LANGS)
    assert (en_pos is not fr_pos) == spec.separate_embeddings


def test_gradients_reach_only_the_batch_language_specific_parameters():
    m = model(tiny("sep-emb+l1-3", dropout=0.0, attention_dropout=0.0))
    ids = torch.randint(5, V, (3, 12))
    positions = torch.tensor([[0, 1], [1, 5], [2, 11], [2, 3]])
    m(ids, "fr", None, positions, ids[positions[:, 0], positions[:, 1]]).backward()
    for name, p in m.language_specific_parameters("en"):
        assert p.grad is None, name
    for name, p in m.named_parameters():
        if "by_lang.en." not in name:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    lang_grad = m.encoder.language_embeddings.weight.grad
    assert lang_grad[0].abs().sum() == 0 and lang_grad[1].abs().sum() > 0


def test_padding_does_not_change_non_padding_outputs():
    enc = model(tiny("sep-l1-3")).encoder.eval()
    a, b = torch.randint(5, V, (1, 9)), torch.randint(5, V, (1, 5))
    alone_a = enc(a, "fr").last_hidden_state
    alone_b = enc(b, "fr").last_hidden_state
    batch = torch.full((2, 12), 2)  # 2 = <pad>, three positions appended to a, seven to b
    batch[0, :9], batch[1, :5] = a[0], b[0]
    padding = batch == 2
    out = enc(batch, "fr", padding).last_hidden_state
    torch.testing.assert_close(out[0, :9], alone_a[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[1, :5], alone_b[0], rtol=1e-5, atol=1e-5)


def test_sdpa_attention_equals_textbook_softmax_attention():
    torch.manual_seed(1)
    cfg = tiny()
    att = SelfAttention(cfg).eval()
    B, T, D, H = 2, 7, cfg.d_model, cfg.n_heads
    x = torch.randn(B, T, D)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[1, 4:] = True
    got = att(x, ~padding[:, None, None, :])

    q, k, v = att.qkv(x).split(D, dim=-1)
    heads = lambda t: t.view(B, T, H, D // H).transpose(1, 2)  # noqa: E731
    scores = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(D // H)
    scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
    expected = att.out((scores.softmax(-1) @ heads(v)).transpose(1, 2).reshape(B, T, D))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_attention_never_asks_for_cudnns_kernel(attention_backends):
    # cuDNN's attention builds a plan for every new shape (11-16 ms of CPU a call on an H200): batches
    # of varying length spent most of a fine-tuning step there.
    model = MaskedLM(tiny()).eval()
    ids = torch.randint(5, 50, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    model.encoder(ids, "en")
    model.encoder(ids, "en", padding)
    assert attention_backends and set(attention_backends) == {(False, True, True)}
    assert torch.backends.cuda.cudnn_sdp_enabled()   # the choice is the model's own, not left behind


@pytest.mark.parametrize("preset", ["default", "sep-emb"])
def test_gathered_mlm_loss_equals_full_logits_cross_entropy(preset):
    m = model(tiny(preset)).eval()
    hidden = torch.randn(3, 10, m.config.d_model)
    mask = torch.rand(3, 10) < 0.3
    mask[0, 0] = True
    target = torch.randint(0, V, (int(mask.sum()),))
    rows, cols = mask.nonzero(as_tuple=True)
    full = m.head.predict_all(hidden, "fr", chunk_tokens=7)  # chunks that do not align with rows
    expected = F.cross_entropy(full[mask], target)
    for positions in (mask, torch.stack([rows, cols], 1), rows * 10 + cols):
        torch.testing.assert_close(m.head.mlm_loss(hidden, positions, target, "fr"), expected)
    sum_loss = m.head.mlm_loss(hidden, mask, target, "fr", reduction="sum")
    torch.testing.assert_close(sum_loss, expected * len(target))
    assert torch.equal(m.head.decode(hidden, "fr", chunk_tokens=4), full.argmax(-1))
    # nothing to predict (a batch of special tokens alone): a loss of 0 with zero gradients, not NaN
    nothing = torch.zeros(3, 10, dtype=torch.bool)
    hidden.requires_grad_(True)
    empty = m.head.mlm_loss(hidden, nothing, torch.zeros(0, dtype=torch.long), "fr")
    assert empty.item() == 0.0
    empty.backward()
    assert torch.count_nonzero(hidden.grad) == 0


def test_tied_decoder_shares_storage_with_its_language_embedding():
    for preset in ("default", "sep-emb"):
        m = model(tiny(preset))
        for lang in LANGS:
            table = for_language(m.encoder.token_embeddings, lang).weight
            assert m.head.decoder_weight(lang) is table
        assert sum(1 for n, _ in m.named_parameters() if "token_embeddings" in n) == (2 if preset == "sep-emb" else 1)
    # The tie survives a state-dict round trip: loading one tensor updates input and output.
    m = model(tiny())
    state = {k: v.clone() for k, v in m.state_dict().items()}
    state["encoder.token_embeddings.weight"].fill_(0.5)
    m.load_state_dict(state)
    assert torch.all(m.head.decoder_weight("en") == 0.5)


def test_layer_hook_and_encode_from_run_the_remaining_layers():
    enc = model(tiny("sep-l1-3", n_layers=4)).encoder.eval()
    ids = torch.randint(5, V, (2, 6))
    full = enc(ids, "en", output_hidden_states=True)
    assert len(full.hidden_states) == 5 and full.hidden_states[-1] is full.last_hidden_state
    shift = torch.randn(enc.config.d_model)
    hooked = enc(ids, "en", layer_hook=lambda layer, h: h + shift if layer == 2 else h).last_hidden_state
    resumed = enc.encode_from(full.hidden_states[2] + shift, "en", start_layer=2, output_hidden_states=True)
    torch.testing.assert_close(hooked, resumed.last_hidden_state)
    assert len(resumed.hidden_states) == 3
    torch.testing.assert_close(enc.encode_from(full.hidden_states[4], "en", 4).last_hidden_state,
                               full.last_hidden_state)
    assert not torch.allclose(hooked, full.last_hidden_state)


@pytest.mark.parametrize("bounds, fragment", [((0, 3), "start at layer 1"), ((2, 4), "start at layer 1"),
                                              ((1, 7), "top one stays shared"), ((1, 9), "top one stays shared"),
                                              ((1, 0), "must end between"), ((1,), "two integers")])
def test_separate_layers_must_be_a_bottom_range_below_the_top(bounds, fragment):
    with pytest.raises(XltError, match=fragment):
        tiny(SharingSpec(separate_layers=bounds))


def test_presets_that_do_not_fit_the_depth_are_refused():
    with pytest.raises(XltError, match="model has 2 layers"):
        EncoderConfig.preset("tiny", vocab_size=V, languages=LANGS, sharing="sep-l1-3")


def test_unknown_presets_list_the_known_ones():
    with pytest.raises(XltError, match="known: wu2020, small, mini, tiny"):
        EncoderConfig.preset("base", vocab_size=V, languages=LANGS)
    with pytest.raises(XltError, match="known: default, sep-emb, sep-l1-3"):
        SharingSpec.preset("sep-l1-2")
    with pytest.raises(XltError, match="unknown EncoderConfig field"):
        EncoderConfig.preset("tiny", vocab_size=V, languages=LANGS, n_layer=3)


@pytest.mark.parametrize("bad, fragment", [({"n_heads": 3}, "must divide"), ({"languages": []}, "at least one"),
                                           ({"languages": ["en", "en"]}, "distinct"),
                                           ({"languages": ["en", "f.r"]}, "identifier"),
                                           ({"activation": "swish"}, "unknown activation"),
                                           ({"dropout": 1.0}, "dropout")])
def test_inconsistent_configs_are_refused(bad, fragment):
    with pytest.raises(XltError, match=fragment):
        tiny(**bad)


def test_config_round_trips_through_json(tmp_path):
    cfg = tiny("sep-emb+l1-3", lang_embeddings=False)
    again = EncoderConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.sharing.separate_layers == (1, 3)
    for dataclass in (EncoderConfig, SharingSpec):
        assert all(f.metadata.get("help") for f in dataclasses.fields(dataclass))
    assert set(MODEL_PRESETS) == {"wu2020", "small", "mini", "tiny"}
    with pytest.raises(XltError) as err:
        EncoderConfig.from_dict({**cfg.to_dict(), "n_layer": 3}, path=tmp_path / "config.json")
    assert str(err.value).startswith(f"{tmp_path / 'config.json'}: unknown encoder config field(s): n_layer")


def test_unknown_language_and_overlong_input_are_refused():
    enc = model(tiny()).encoder
    with pytest.raises(XltError, match="not one of the model's languages"):
        enc(torch.zeros(1, 3, dtype=torch.long), "de")
    with pytest.raises(XltError, match="max_positions"):
        enc(torch.zeros(1, 513, dtype=torch.long), "en")


def test_same_seed_gives_same_weights_and_same_training_loss():
    ids = torch.randint(5, V, (2, 8))
    positions = torch.tensor([[0, 2], [1, 7]])

    def run(seed: int):
        m = model(tiny("sep-emb"), seed=seed).train()
        torch.manual_seed(7)  # the dropout masks
        loss = m(ids, "en", None, positions, ids[positions[:, 0], positions[:, 1]])
        return loss, [p.detach() for p in m.parameters()]

    (loss_a, weights_a), (loss_b, weights_b), (_, weights_c) = run(123), run(123), run(124)
    assert torch.equal(loss_a, loss_b)
    assert all(torch.equal(a, b) for a, b in zip(weights_a, weights_b))
    assert not torch.equal(weights_a[0], weights_c[0])


def test_language_index_and_code_select_the_same_parameters():
    m = model(tiny("sep-emb")).eval()
    ids = torch.randint(5, V, (2, 6))
    torch.testing.assert_close(m.encoder(ids, 1).last_hidden_state, m.encoder(ids, "fr").last_hidden_state)
    assert not torch.allclose(m.encoder(ids, 0).last_hidden_state, m.encoder(ids, "fr").last_hidden_state)


def test_language_embedding_row_can_differ_from_the_batch_language():
    enc = model(tiny("sep-emb")).encoder.eval()
    ids = torch.randint(5, V, (1, 6))
    fr_tables = for_language(enc.token_embeddings, "fr")(ids) + for_language(enc.position_embeddings, "fr").weight[:6]
    expected = enc.embedding_norm(fr_tables + enc.language_embeddings.weight[0])  # the English row
    torch.testing.assert_close(enc.embed(ids, "fr", lang_embedding="en"), expected)
    assert not torch.allclose(enc.embed(ids, "fr"), expected)


def test_flops_per_token_formula():
    cfg = EncoderConfig.preset("wu2020", vocab_size=80_000, languages=LANGS, sharing="sep-l1-3")
    with torch.device("meta"):
        m = MaskedLM(cfg)
    D, L, T = 768, 8, 256
    expected = 6 * L * layer_params(D, 3072) + 12 * L * T * D + 0.15 * 6 * D * 80_000
    assert m.flops_per_token(T) == pytest.approx(expected)


def test_equal_copies_init_equalises_positions_and_layers_but_not_token_tables():
    from xlt.model.encoder import LanguageSpecific, start_copies_equal

    net = model(tiny("sep-emb+l1-3", n_layers=4))
    enc = net.encoder
    before = {name: p.detach().clone() for name, p in net.named_parameters()}
    assert not torch.equal(enc.position_embeddings.by_lang["en"].weight, enc.position_embeddings.by_lang["fr"].weight)
    start_copies_equal(enc)
    separated = [m for m in enc.modules() if isinstance(m, LanguageSpecific)]
    assert len(separated) == 2 + 3       # token and position tables, three bottom layers
    for module in separated:
        en, fr = module.by_lang["en"].state_dict(), module.by_lang["fr"].state_dict()
        same = all(torch.equal(en[k], fr[k]) for k in en)
        assert same == (module is not enc.token_embeddings), module
    for name, p in net.named_parameters():   # the first language and every shared part keep their draws
        if ".by_lang.fr." not in name or "token_embeddings" in name:
            assert torch.equal(p, before[name]), name
    # still separate parameters: training one language's copy leaves the other's alone
    assert enc.position_embeddings.by_lang["en"].weight.data_ptr() != enc.position_embeddings.by_lang["fr"].weight.data_ptr()
