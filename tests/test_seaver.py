"""SEAVER: harness, the self-reweighting equations recomputed independently, baseline equivalence and validation."""

import subprocess
import sys

import pytest
import torch
from model_harness import ROWS, ModelHarness
from transformers import set_seed

from pairzoo import SeaverConfig, create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES
from pairzoo.modeling.common import conditional_span_masks
from pairzoo.modeling.encoders import EncoderStack, attention_probabilities, layer_list, projection_modules


class TestSeaver(ModelHarness):
    model_name = "seaver"


class TestSeaverClassificationVariant(ModelHarness):
    model_name = "seaver"
    config_overrides = {
        "num_labels": 3,
        "use_transform": True,
        "pooling": "mean",
        "reweight_heads": [0, 2],
        "detach_reweighting": False,
        "alpha": 0.5,
    }


def _encode(tokenizer, rows=ROWS, with_sentence2: bool = True, **kwargs) -> dict:
    return encode_conditional_inputs(
        tokenizer,
        [r["sentence1"] for r in rows],
        [r["sentence2"] for r in rows] if with_sentence2 else None,
        [r["condition"] for r in rows],
        **kwargs,
    )


def _model(backbone: str = "tiny-bert", **overrides):
    set_seed(0)
    return create_model("seaver", backbone=backbone, **overrides).eval()


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
@pytest.mark.parametrize("with_sentence2", [True, False])
def test_span_masks_derived_from_input_ids_match_the_processor(backbone, with_sentence2):
    batch = _encode(load_tokenizer(backbone), with_sentence2=with_sentence2, return_span_masks=True)
    sentence, condition = conditional_span_masks(batch["input_ids"], batch["attention_mask"])
    assert torch.equal(sentence, batch["sentence_mask"])
    assert torch.equal(condition, batch["condition_mask"])
    with torch.no_grad():
        out = _model(backbone)(batch["input_ids"], batch["attention_mask"], output_internals=True)
    assert torch.equal(out.sentence_mask, batch["sentence_mask"])
    assert torch.equal(out.condition_mask, batch["condition_mask"])


def test_single_separator_input_has_an_empty_condition_part():
    ids = torch.tensor([[101, 7, 8, 102, 0]])
    sentence, condition = conditional_span_masks(ids, torch.tensor([[1, 1, 1, 1, 0]]))
    assert sentence.tolist() == [[1, 1, 1, 1, 0]] and condition.tolist() == [[0, 0, 0, 0, 0]]


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_last_layer_probabilities_equal_eager_output_attentions(backbone):
    model = _model(backbone)
    batch = _encode(load_tokenizer(backbone))
    last = len(layer_list(model.backbone)) - 1
    with torch.no_grad():
        sdpa_out = model(**batch, output_internals=True)
        model.set_attn_implementation("eager")
        eager = model.backbone(**batch, output_attentions=True, output_hidden_states=True)
        recomputed = attention_probabilities(model.backbone, last, eager.hidden_states[-2], batch["attention_mask"])
    assert model.backbone.config._attn_implementation == "eager"
    torch.testing.assert_close(recomputed, eager.attentions[-1], rtol=0, atol=1e-6)
    torch.testing.assert_close(sdpa_out.last_layer_attentions, eager.attentions[-1], rtol=0, atol=1e-5)
    # padding keys get nothing from real tokens (a padding query's row is the architecture's own business: DeBERTa
    # masks it entirely, which leaves it uniform)
    valid = batch["attention_mask"].bool()
    padding_keys = (valid[:, None, :, None] & ~valid[:, None, None, :]).expand_as(recomputed)
    assert recomputed[padding_keys].abs().max() == 0


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_hidden_states_before_the_last_are_the_last_layers_input(backbone):
    """SEAVER takes the last layer's input from the backbone's `hidden_states[-2]`: for every architecture that is
    what enters the last layer when the layers run one at a time, each with its own position information."""
    model = _model(backbone)
    batch = _encode(load_tokenizer(backbone))
    with torch.no_grad():
        outputs = model.backbone(**batch, output_hidden_states=True)
        stack = EncoderStack(model.backbone, batch["attention_mask"])
        layer_input = stack.forward(stack.embed(batch["input_ids"], batch.get("token_type_ids")), 0, len(stack) - 1)
        last = stack.finish(stack.run(len(stack) - 1, layer_input))
    torch.testing.assert_close(outputs.hidden_states[-2], layer_input, rtol=0, atol=1e-6)
    torch.testing.assert_close(outputs.last_hidden_state, last, rtol=0, atol=1e-6)


def _reference_augmented(model, batch, attentions, last_hidden):
    """AO recomputed per example and head with explicit index sets from eager `attentions[-1]` and processor masks."""
    config = model.config
    heads = config.reweight_heads or range(config.backbone_config.num_attention_heads)
    projection = model.reweighting_projection
    augmented = torch.empty_like(last_hidden)
    blocks = []
    for i in range(last_hidden.shape[0]):
        s_idx = batch["sentence_mask"][i].nonzero().squeeze(1)
        c_idx = batch["condition_mask"][i].nonzero().squeeze(1)
        hidden = last_hidden[i]
        per_head = []
        for h in heads:
            a = attentions[i, h]
            sc, cs = a[s_idx][:, c_idx], a[c_idx][:, s_idx]
            w_s, w_c = torch.softmax(sc @ cs, dim=-1), torch.softmax(cs @ sc, dim=-1)
            ro = hidden.clone()
            ro[s_idx] = w_s @ hidden[s_idx]
            ro[c_idx] = w_c @ hidden[c_idx]
            per_head.append(ro)
            blocks.append((i, h, w_s, w_c))
        merged = torch.cat(per_head, dim=-1) @ projection.weight.T + projection.bias
        augmented[i] = merged + config.alpha * hidden
    return augmented, blocks


# (backbone, dtype, tolerance of AO and the logits, tolerance of W_S and W_C): BERT and RoBERTa in float32;
# DeBERTa (relative positions) and MPNet (position bias), whose attention is not q . k alone, in float64; ModernBERT
# (rotary, sliding window) in float32, since its eager attention takes the softmax in float32, where a float64 mask's
# minimum overflows to -inf and the fully masked rows of padding queries become NaN.
RECOMPUTED = [
    ("tiny-bert", torch.float32, 1e-5, 1e-6),
    ("tiny-roberta", torch.float32, 1e-5, 1e-6),
    ("tiny-deberta-v2", torch.float64, 1e-12, 1e-12),
    ("tiny-mpnet", torch.float64, 1e-12, 1e-12),
    ("tiny-modernbert", torch.float32, 1e-5, 1e-6),
]


@pytest.mark.parametrize("backbone, dtype, atol, weight_atol", RECOMPUTED)
@pytest.mark.parametrize("overrides", [{}, {"reweight_heads": [3, 1], "alpha": 0.7, "use_transform": True}])
def test_augmented_states_recomputed_independently(backbone, dtype, atol, weight_atol, overrides):
    """AO, W_S and W_C from the backbone's own eager `output_attentions` (the reference probabilities, computed by
    the encoder itself, not by SEAVER's recomputation) and the last hidden state, per example and head."""
    model = _model(backbone, **overrides).to(dtype)
    model.set_attn_implementation("eager")
    batch = _encode(load_tokenizer(backbone), return_span_masks=True)
    features = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        out = model(**features, output_attentions=True, output_hidden_states=True, output_internals=True)
        expected, blocks = _reference_augmented(model, batch, out.attentions[-1], out.hidden_states[-1])
        logits = model.head(expected[:, 0])  # (batch_size, num_labels)
    assert out.augmented_hidden_states.dtype == dtype
    torch.testing.assert_close(out.augmented_hidden_states, expected, rtol=0, atol=atol)
    torch.testing.assert_close(out.logits, logits, rtol=0, atol=atol)
    heads = list(model.config.reweight_heads or range(4))
    for i, h, w_s, w_c in blocks:
        k = heads.index(h)
        torch.testing.assert_close(
            out.reweighting_sentence[i, k, : len(w_s), : len(w_s)], w_s, rtol=0, atol=weight_atol
        )
        torch.testing.assert_close(
            out.reweighting_condition[i, k, : len(w_c), : len(w_c)], w_c, rtol=0, atol=weight_atol
        )
    assert out.reweighting_sentence.shape[1] == len(heads)


def test_reweighting_rows_sum_to_one_and_padding_gets_no_mass():
    batch = _encode(load_tokenizer("tiny-bert"), return_span_masks=True)
    with torch.no_grad():
        out = _model()(batch["input_ids"], batch["attention_mask"], output_internals=True)
    for weights, mask in (
        (out.reweighting_sentence, batch["sentence_mask"]),
        (out.reweighting_condition, batch["condition_mask"]),
    ):
        lengths = mask.sum(1)
        inside = torch.arange(weights.shape[-1])[None] < lengths[:, None]  # (B, l)
        row_sums = weights.sum(-1)  # (B, H, l)
        torch.testing.assert_close(row_sums, inside[:, None].expand_as(row_sums).float(), rtol=0, atol=1e-5)
        outside = ~(inside[:, :, None] & inside[:, None, :])[:, None].expand_as(weights)
        assert weights[outside].abs().max() == 0
        assert (weights[~outside] > 0).all()


@pytest.mark.parametrize("backbone", ["tiny-roberta", "tiny-deberta-v2", "tiny-mpnet", "tiny-modernbert"])
def test_first_row_fast_path_equals_full_path(backbone):
    model = _model(backbone, alpha=1.5)
    batch = _encode(load_tokenizer(backbone))
    with torch.no_grad():
        fast = model(**batch)
        full = model(**batch, output_internals=True)
        head_on_full = model.head(full.augmented_hidden_states[:, 0])
    assert fast.augmented_hidden_states is None
    torch.testing.assert_close(fast.logits, full.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(fast.logits, head_on_full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_without_reweighting_is_exactly_the_baseline(backbone):
    set_seed(1)
    baseline = create_model("cross-encoder", backbone=backbone, num_labels=3, use_transform=True).eval()
    plain = _model(backbone, use_reweighting=False, num_labels=3, use_transform=True)
    full = _model(backbone, num_labels=3, use_transform=True)
    assert set(plain.state_dict()) == set(baseline.state_dict())
    assert set(full.state_dict()) - set(baseline.state_dict()) == {
        "reweighting_projection.weight",
        "reweighting_projection.bias",
    }
    plain.load_state_dict(baseline.state_dict(), strict=True)
    batch = _encode(load_tokenizer(backbone))
    with torch.no_grad():
        torch.testing.assert_close(plain(**batch).logits, baseline(**batch).logits, rtol=0, atol=0)
        assert not torch.allclose(full(**batch).logits, plain(**batch).logits)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-deberta-v2", "tiny-mpnet"])
def test_training_mode_reweights_with_attention_probabilities_before_dropout(backbone):
    """In training mode the reweighting still reads probabilities (rows summing to one over the valid keys), not
    the attention dropout's rescaled sample, and the last layer is left in training mode."""
    model = _model(backbone).train()
    assert model.config.backbone_config.attention_probs_dropout_prob > 0
    batch = _encode(load_tokenizer(backbone))
    with torch.no_grad():
        out = model(**batch, output_internals=True)
    valid = batch["attention_mask"].bool()
    rows = out.last_layer_attentions.sum(-1).permute(0, 2, 1)[valid]
    torch.testing.assert_close(rows, torch.ones_like(rows), rtol=0, atol=1e-5)
    assert all(module.training for module in model.modules())


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_every_architecture_trains(backbone):
    """create -> forward on a conditional batch -> backward, with the gradient also flowing through the reweighting
    (`detach_reweighting=False`): a finite gradient on every trainable parameter, a non-zero one on W_o and the
    head."""
    model = _model(backbone, detach_reweighting=False, use_transform=True).train()
    rows = ROWS[:2]
    out = model(**_encode(load_tokenizer(backbone), rows=rows), labels=torch.tensor([r["label"] for r in rows]))
    assert out.logits.shape == (2, 1) and torch.isfinite(out.loss)
    out.loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), backbone
    assert all(g.any() for name, g in grads.items() if name.startswith(("head.", "reweighting_projection."))), backbone


def test_explicit_span_masks_give_the_same_result_as_derived_ones():
    batch = _encode(load_tokenizer("tiny-bert"), return_span_masks=True)
    model = _model()
    # the method is symmetric in the two parts, so to show the given masks are used, move the boundary: the sentence
    # part's last token (its closing separator) joins the condition part
    closing = batch["sentence_mask"] - torch.nn.functional.pad(batch["sentence_mask"][:, 1:], (0, 1))
    moved = {"sentence_mask": batch["sentence_mask"] - closing, "condition_mask": batch["condition_mask"] + closing}
    with torch.no_grad():
        given = model(**batch, output_internals=True)
        derived = model(batch["input_ids"], batch["attention_mask"], output_internals=True)
        shifted = model(**{**batch, **moved}, output_internals=True)
    torch.testing.assert_close(given.augmented_hidden_states, derived.augmented_hidden_states, rtol=0, atol=0)
    assert torch.equal(shifted.condition_mask, moved["condition_mask"])
    assert (shifted.augmented_hidden_states - given.augmented_hidden_states).abs().max() > 1e-3
    with pytest.raises(ValueError, match="sentence_mask"):
        model(batch["input_ids"], batch["attention_mask"], sentence_mask=batch["sentence_mask"])


def test_random_reweighting_source_ablation():
    model = _model(reweighting_source="random")
    batch = _encode(load_tokenizer("tiny-bert"))

    def forward(seed: int):
        torch.manual_seed(seed)
        with torch.no_grad():
            return model(**batch, output_internals=True)

    first, again, other = forward(0), forward(0), forward(1)
    torch.testing.assert_close(first.logits, again.logits, rtol=0, atol=0)
    valid = batch["attention_mask"]
    for out in (first, other):
        part1, part2 = out.sentence_mask, out.condition_mask
        assert torch.equal(part1 + part2, valid) and (part1 * part2).sum() == 0
        assert (part1[:, 0] == 1).all() and (part2.sum(1) >= 1).all()
        assert (part1[:, :-1] >= part1[:, 1:]).all(), "first part must be a prefix"
        assert out.reweighting_sentence.shape[-1] == part1.sum(1).max()
        assert out.reweighting_condition.shape[-1] == part2.sum(1).max()
    assert not torch.equal(first.sentence_mask, other.sentence_mask)
    assert not torch.equal(first.sentence_mask, conditional_span_masks(batch["input_ids"], valid)[0])


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-deberta-v2", "tiny-modernbert"])
def test_detach_reweighting_controls_gradient_through_the_reweighting(backbone):
    batch = _encode(load_tokenizer(backbone))
    labels = torch.tensor([r["label"] for r in ROWS])
    model = _model(backbone, pooling="mean")
    query = projection_modules(model.backbone, len(layer_list(model.backbone)) - 1)[0].weight
    grads = {}
    for detach in (True, False):
        model.config.detach_reweighting = detach
        model.zero_grad()
        torch.manual_seed(0)
        out = model(**batch, labels=labels, output_internals=True)
        assert out.reweighting_sentence.requires_grad is (not detach)
        assert out.reweighting_condition.requires_grad is (not detach)
        out.loss.backward()
        grads[detach] = query.grad.clone()
    assert not torch.allclose(grads[True], grads[False])


def test_flatten_pooling_reads_a_fixed_length():
    tokenizer = load_tokenizer("tiny-bert")
    model = _model(pooling="flatten", flatten_length=48, use_transform=True)
    assert model.head.classifier.in_features == 48 * model.config.backbone_config.hidden_size
    padded = _encode(tokenizer, rows=[ROWS[2], ROWS[1]])
    alone = _encode(tokenizer, rows=[ROWS[2]])
    with torch.no_grad():
        torch.testing.assert_close(model(**padded).logits[0], model(**alone).logits[0], rtol=0, atol=1e-5)
        with pytest.raises(ValueError, match="flatten_length"):
            model(**_encode(tokenizer, rows=[{**ROWS[1], "sentence1": ROWS[1]["sentence1"] * 3}]))


def test_conditional_classification_without_second_sentence():
    model = _model("tiny-roberta", num_labels=3)
    batch = _encode(load_tokenizer("tiny-roberta"), with_sentence2=False, return_span_masks=True)
    with torch.no_grad():
        out = model(batch["input_ids"], batch["attention_mask"], labels=torch.tensor([0, 1, 2]), output_internals=True)
    assert out.logits.shape == (3, 3) and torch.isfinite(out.loss)
    assert torch.equal(out.condition_mask, batch["condition_mask"])


def test_processor_rejects_a_condition_that_cannot_fit_and_empty_fields():
    tokenizer = load_tokenizer("tiny-bert")
    with pytest.raises(ValueError, match="condition"):
        encode_conditional_inputs(tokenizer, "A man.", "A woman.", "the colour of " * 20, max_length=16)
    with pytest.raises(ValueError, match="condition"):
        encode_conditional_inputs(tokenizer, "A man.", "A woman.", "  ")
    with pytest.raises(ValueError, match="sentence1"):
        encode_conditional_inputs(tokenizer, "", "A woman.", "The gender.")
    short = encode_conditional_inputs(tokenizer, "A man " * 30, "A woman " * 30, "The gender.", max_length=24)
    assert short["input_ids"].shape[1] == 24


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"reweight_heads": []}, "reweight_heads"),
        ({"reweight_heads": [0, 0]}, "reweight_heads"),
        ({"reweight_heads": "all"}, "reweight_heads"),
        (
            {"reweight_heads": [4], "backbone_config": {"model_type": "bert", "num_attention_heads": 4}},
            "reweight_heads",
        ),
        ({"reweighting_source": "attention"}, "reweighting_source"),
        ({"detach_reweighting": "yes"}, "detach_reweighting"),
        ({"use_reweighting": None}, "use_reweighting"),
        ({"pooling": "max"}, "pooling"),
        ({"pooling": "flatten"}, "flatten_length"),
        ({"pooling": "flatten", "flatten_length": 1}, "flatten_length"),
        ({"flatten_length": 64}, "flatten_length"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"classifier_dropout": 1.5}, "classifier_dropout"),
        ({"num_labels": 0}, "num_labels"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SeaverConfig(**kwargs)


@pytest.mark.integration
def test_minilm_reweighting_projection_initialised_and_fast_path_matches():
    model = create_model("seaver", backbone="minilm").eval()
    weight = model.reweighting_projection.weight
    assert weight.shape == (384, 12 * 384)
    assert 0.005 < weight.std().item() < 0.05 and model.reweighting_projection.bias.abs().max() == 0
    batch = _encode(load_tokenizer("minilm"))
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, model(**batch, output_internals=True).logits)


def test_heatmap_of_one_example_is_written(tmp_path):
    from pairzoo.visualize import plot_seaver_reweighting, seaver_attention_maps

    model, tokenizer = _model(), load_tokenizer("tiny-bert")
    row = ROWS[0]
    maps = seaver_attention_maps(model, tokenizer, row["sentence1"], row["sentence2"], row["condition"])
    sentence_length = int(_encode(tokenizer, rows=[row], return_span_masks=True)["sentence_mask"].sum())
    assert len(maps.tokens) == sentence_length and maps.tokens[0] == "[CLS]" and maps.tokens[-1] == "[SEP]"
    assert maps.attention.shape == maps.reweighting.shape == (sentence_length, sentence_length)
    torch.testing.assert_close(maps.reweighting.sum(-1), torch.ones(sentence_length))
    baseline = create_model("cross-encoder", backbone="tiny-bert").eval()
    with_baseline = seaver_attention_maps(
        model, tokenizer, row["sentence1"], row["sentence2"], row["condition"], baseline
    )
    assert not torch.allclose(with_baseline.attention, maps.attention)
    path = plot_seaver_reweighting(maps, tmp_path / "figure.png", title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_visualize_imports_without_matplotlib():
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import pairzoo.visualize as v\n"
        "try:\n    v.heatmap_figure([])\nexcept ImportError as e:\n    print('needs', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "needs pairzoo.visualize needs matplotlib" in proc.stdout
