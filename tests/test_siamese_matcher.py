"""Siamese matchers (ESIM, RE2) with FA/SFA: harness for every (matcher, feature_attention) pair, FA's gate and SFA's
branch weights recomputed from the blocks' own parameters, the MiniLM embedding initialisation, and bad input."""

import math

import pytest
import torch
from model_harness import ROWS, ModelHarness
from transformers import set_seed

from pairzoo import SiameseMatcherConfig, create_model, load_tokenizer
from pairzoo.modeling.modeling_siamese_matcher import FeatureAttention, SelectiveFeatureAttention
from pairzoo.pipelines.pipeline_conditional_similarity import encode_tri_inputs
from pairzoo.training.collators import TriEncoderCollator, make_collator

# Small enough to be fast, and within the eq. 9 rule for L = 32 (8.33 ln 32 = 28.9 < 64 // 2 = 32).
TINY = {"hidden_size": 64, "max_sequence_length": 32, "re2_blocks": 2}


class _SiameseHarness(ModelHarness):
    """Each (matcher, block) pair runs the harness on one tiny backbone; together they cover both for both hosts."""

    model_name = "siamese-matcher"
    backbone_name = "tiny-bert"

    @pytest.fixture()
    def backbone(self) -> str:
        return self.backbone_name

    def make_inputs(self, tokenizer, rows, model):
        batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
        labels = [r["label"] for r in rows]
        if model.config.num_labels > 1:
            labels = [int(label) % model.config.num_labels for label in labels]
        batch["labels"] = torch.tensor(labels)
        return batch


class TestEsim(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "none"}


class TestEsimFa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "fa", "num_labels": 3}


class TestEsimSfa(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "sfa", "num_labels": 3}


class TestRe2(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "none", "num_labels": 3}


class TestRe2Fa(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "fa"}


class TestRe2Sfa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "sfa", "re2_blocks": 3, "num_labels": 2}


def _features(batch: int = 3, length: int = 7, dim: int = 64, seed: int = 0):
    """Random features and a right-padded mask with rows of lengths length, 4, 1."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, dim, generator=generator)
    lengths = torch.tensor([length, 4, 1][:batch])
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return x, mask


def test_fa_gate_recomputed_from_parameters():
    """e = sigmoid(W2 tanh(W1 mean_valid(x))), u = e * x on valid tokens, zero on padding."""
    torch.manual_seed(0)
    block = FeatureAttention(64, 2).eval()
    x, mask = _features()
    w1, w2 = block.squeeze.weight, block.excite.weight
    assert w1.shape == (32, 64) and w2.shape == (64, 32)
    with torch.no_grad():
        out = block(x, mask)
        for i in range(x.shape[0]):
            valid = x[i, : int(mask[i].sum())]
            gate = torch.sigmoid(w2 @ torch.tanh(w1 @ valid.mean(0)))
            torch.testing.assert_close(block.gate(x, mask)[i], gate)
            torch.testing.assert_close(out[i, : len(valid)], valid * gate)
            if len(valid) < x.shape[1]:
                assert out[i, len(valid) :].abs().max().item() == 0.0
    # the gate ignores whatever sits in padding positions
    noisy = x.clone()
    noisy[mask == 0] = 1e3
    with torch.no_grad():
        torch.testing.assert_close(block(noisy, mask), out)


def _sfa_by_hand(block: SelectiveFeatureAttention, x: torch.Tensor) -> "tuple[torch.Tensor, torch.Tensor]":
    """SFA on ONE unpadded sentence (L, D), from the block's own parameters: 1x1 convolutions as matrix products,
    the N stacked BiGRUs in order, eqs. 6-8 written out."""
    reduced = x @ block.reduce.weight.squeeze(-1).T + block.reduce.bias
    views, hidden = [], reduced.unsqueeze(0)
    for gru in block.branches:
        hidden = gru(hidden)[0]
        views.append(hidden[0])
    fused = sum(views)
    s = fused.mean(0) + fused.max(0).values
    z = torch.tanh(block.squeeze.weight @ s)
    a = torch.stack([torch.sigmoid(fc.weight @ z) for fc in block.select])  # (N, 2D/r1)
    weights = torch.exp(a) / torch.exp(a).sum(0, keepdim=True)
    selected = sum(w * v for w, v in zip(weights, views))
    output = selected @ block.expand.weight.squeeze(-1).T + block.expand.bias
    return output, weights


@pytest.mark.parametrize("branches, reductions", [(3, (2, 2)), (2, (4, 1))])
def test_sfa_branch_weights_recomputed_from_parameters(branches, reductions):
    torch.manual_seed(0)
    block = SelectiveFeatureAttention(64, branches, reductions).eval()
    x, mask = _features()
    width = 2 * (64 // reductions[0])
    with torch.no_grad():
        out, weights = block(x, mask, return_weights=True)
        assert out.shape == x.shape and weights.shape == (3, branches, width)
        torch.testing.assert_close(weights.sum(1), torch.ones(3, width))
        assert (weights > 0).all() and (weights < 1).all()
        for i in range(x.shape[0]):
            length = int(mask[i].sum())
            expected_out, expected_weights = _sfa_by_hand(block, x[i, :length])
            torch.testing.assert_close(weights[i], expected_weights, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(out[i, :length], expected_out, atol=1e-5, rtol=1e-5)
            if length < x.shape[1]:
                assert out[i, length:].abs().max().item() == 0.0


def test_sfa_weights_differ_per_feature_and_per_sentence():
    """The selection is per feature and input-dependent (not one scalar per branch, not a constant)."""
    torch.manual_seed(0)
    block = SelectiveFeatureAttention(64, 3, (2, 2)).eval()
    x, mask = _features()
    with torch.no_grad():
        _, weights = block(x, mask, return_weights=True)
    assert weights[0].std(-1).min() > 1e-4
    assert (weights[0] - weights[1]).abs().max() > 1e-4


@pytest.mark.parametrize("matcher", ["esim", "re2"])
@pytest.mark.parametrize("feature_attention", ["fa", "sfa"])
def test_blocks_sit_on_both_branches_with_unshared_parameters(matcher, feature_attention):
    model = create_model(
        "siamese-matcher", backbone="tiny-bert", matcher=matcher, feature_attention=feature_attention, **TINY
    )
    block_class = FeatureAttention if feature_attention == "fa" else SelectiveFeatureAttention
    blocks = [m for m in model.modules() if isinstance(m, block_class)]
    per_interaction = 1 if matcher == "esim" else TINY["re2_blocks"]
    assert len(blocks) == 2 * per_interaction
    pointers = {p.data_ptr() for block in blocks for p in block.parameters()}
    assert len(pointers) == sum(len(list(block.parameters())) for block in blocks)
    plain = create_model("siamese-matcher", backbone="tiny-bert", matcher=matcher, **TINY)
    added = sum(p.numel() for block in blocks for p in block.parameters())
    assert model.num_parameters() - plain.num_parameters() == added


def test_minilm_embeddings_initialise_the_word_embeddings_and_can_be_frozen():
    from transformers import AutoModel

    from pairzoo.backbones import minilm_path

    reference = AutoModel.from_pretrained(minilm_path()).get_input_embeddings().weight
    model = create_model("siamese-matcher", backbone="minilm", matcher="re2", freeze_embeddings=True, num_labels=3)
    assert model.embeddings.weight.shape == (30522, 384)
    torch.testing.assert_close(model.embeddings.weight, reference, rtol=0, atol=0)
    assert not model.embeddings.weight.requires_grad
    tokenizer = load_tokenizer("minilm")
    batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in ROWS], [r["sentence2"] for r in ROWS])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model(**batch, labels=torch.tensor([0, 1, 2])).loss.backward()
    optimizer.step()
    torch.testing.assert_close(model.embeddings.weight, reference, rtol=0, atol=0)
    with pytest.raises(ValueError, match="embedding_size"):
        create_model("siamese-matcher", backbone="minilm", embedding_size=100)


def test_tri_collator_rows_without_condition_train_the_model():
    """The training CLI's collator for `input_format = "tri"` feeds the model (sentence pairs, no condition)."""
    set_seed(0)
    model = create_model("siamese-matcher", backbone="tiny-bert", num_labels=3, feature_attention="fa", **TINY)
    collator = make_collator(model, load_tokenizer("tiny-bert"), max_length=32)
    assert isinstance(collator, TriEncoderCollator)
    rows = [{"sentence1": r["sentence1"], "sentence2": r["sentence2"], "label": i} for i, r in enumerate(ROWS)]
    batch = collator(rows)
    assert set(batch) == {"input_ids", "attention_mask", "input_ids_2", "attention_mask_2", "labels"}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = model(**batch).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"matcher": "bimpm"}, "matcher"),
        ({"feature_attention": "se"}, "feature_attention"),
        ({"feature_attention": "fa", "fa_reduction": 4}, "fa_reduction"),  # 150 // 4 = 37 <= 8.33 ln 128 = 40.4
        ({"feature_attention": "sfa", "sfa_reductions": [8, 1]}, "sfa_reductions"),  # 2 (150 // 8) = 36
        ({"feature_attention": "sfa", "sfa_reductions": [2, 4]}, "sfa_reductions"),  # 150 // 4 = 37
        ({"feature_attention": "fa", "hidden_size": 64, "max_sequence_length": 128}, "fa_reduction"),
        ({"sfa_reductions": [2]}, "sfa_reductions"),
        ({"sfa_branches": 0}, "sfa_branches"),
        ({"re2_kernel_size": 4}, "re2_kernel_size"),
        ({"dropout": 1.5}, "dropout"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"num_labels": 0}, "num_labels"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SiameseMatcherConfig(**kwargs)


def test_bottleneck_rule_boundary_follows_eq_9():
    """D // r must exceed 8.33 ln L: with D = 64, r = 2 (width 32) L = 46 passes (31.9) and L = 47 fails (32.1)."""
    assert 8.33 * math.log(46) < 32 < 8.33 * math.log(47)
    SiameseMatcherConfig(feature_attention="fa", hidden_size=64, fa_reduction=2, max_sequence_length=46)
    with pytest.raises(ValueError, match="bottleneck rule"):
        SiameseMatcherConfig(feature_attention="fa", hidden_size=64, fa_reduction=2, max_sequence_length=47)
    # the rule is about the block in use: no block, no check
    SiameseMatcherConfig(feature_attention="none", hidden_size=64, fa_reduction=64, max_sequence_length=512)


@pytest.mark.parametrize("feature_attention", ["none", "sfa"])
def test_empty_sentence_is_a_clear_error(feature_attention):
    model = create_model("siamese-matcher", backbone="tiny-bert", feature_attention=feature_attention, **TINY)
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, ["A man cycles.", "Two men run."], ["A man rides.", "Men run."])
    batch["attention_mask_2"][1] = 0
    with pytest.raises(ValueError, match=r"attention_mask_2.*rows \[1\].*non-empty"):
        model(**batch)
    with pytest.raises(ValueError, match="empty"):
        encode_tri_inputs(tokenizer, ["A man cycles."], ["   "])
    with pytest.raises(ValueError, match="empty"):
        TriEncoderCollator(tokenizer)([{"sentence1": "", "sentence2": "A man.", "label": 1.0}])
    x, mask = _features()
    mask[2] = 0
    for block in (FeatureAttention(64, 2), SelectiveFeatureAttention(64, 3, (2, 2))):
        with pytest.raises(ValueError, match="non-empty"):
            block(x, mask)


def test_left_padding_and_conditions_are_rejected():
    model = create_model("siamese-matcher", backbone="tiny-bert", **TINY)
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, ["A man cycles.", "Two men run fast."], ["A man rides.", "Men run."])
    with pytest.raises(ValueError, match="right-padded"):
        model(**{**batch, "attention_mask": batch["attention_mask"].flip(1)})
    with_condition = encode_tri_inputs(tokenizer, ["A man cycles."], ["A man rides."], ["The place."])
    with pytest.raises(ValueError, match="condition"):
        model(**with_condition)
