"""The C-STS cross-encoder baseline: harness, head equations, and config validation."""

import pytest
import torch
from model_harness import ROWS, ModelHarness
from transformers.activations import ACT2FN

from pairzoo import CrossEncoderConfig, create_model, encode_conditional_inputs, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES, tiny_backbone_config
from pairzoo.modeling.common import ConditionalSimilarityHead


class TestCrossEncoder(ModelHarness):
    model_name = "cross-encoder"


class TestCrossEncoderClassification(ModelHarness):
    model_name = "cross-encoder"
    config_overrides = {"num_labels": 3, "use_transform": True, "pooling": "mean"}


def _batch(tokenizer, rows=ROWS) -> dict:
    return encode_conditional_inputs(
        tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [r["condition"] for r in rows]
    )


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-deberta-v2", "tiny-modernbert"])
def test_regression_head_recomputed_from_parameters(backbone):
    """score = label_min + (label_max - label_min) * (W h_[CLS] + b); MSE against (y - 1) / 4."""
    model = create_model("cross-encoder", backbone=backbone).eval()
    batch = _batch(load_tokenizer(backbone))
    labels = torch.tensor([r["label"] for r in ROWS])
    with torch.no_grad():
        out = model(**batch, labels=labels)
        cls = model.backbone(**batch).last_hidden_state[:, 0]
        logits = cls @ model.head.classifier.weight.T + model.head.classifier.bias
    torch.testing.assert_close(out.logits, logits)  # (batch_size, 1), as transformers' sequence classifiers
    torch.testing.assert_close(out.scores, 1 + 4 * logits.squeeze(-1))
    torch.testing.assert_close(out.loss, torch.mean((logits.squeeze(-1) - (labels - 1) / 4) ** 2))


def test_new_parameters_initialised_sensibly_on_pretrained_backbone():
    model = create_model("cross-encoder", backbone="minilm", use_transform=True)
    for name, param in model.head.named_parameters():
        assert torch.isfinite(param).all(), name
        if name.endswith("weight"):
            assert 0.005 < param.std().item() < 0.05, (name, param.std().item())
        else:
            assert param.abs().max().item() == 0.0, name


def test_pretrained_backbone_weights_are_loaded():
    from transformers import AutoModel

    from pairzoo.backbones import minilm_path

    reference = AutoModel.from_pretrained(minilm_path())
    model = create_model("cross-encoder", backbone="minilm")
    for name, param in model.backbone.state_dict().items():
        torch.testing.assert_close(param, reference.state_dict()[name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"pooling": "max"}, "pooling"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"classifier_dropout": 1.5}, "classifier_dropout"),
        ({"num_labels": 0}, "num_labels"),
        ({"backbone_config": {"hidden_size": 4}}, "backbone_config"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        CrossEncoderConfig(**kwargs)


def test_unknown_model_and_backbone_names():
    with pytest.raises(ValueError, match="Unknown model 'nope'"):
        create_model("nope", backbone="tiny-bert")
    with pytest.raises(ValueError, match="Unknown backbone 'not-a-backbone'"):
        create_model("cross-encoder", backbone="not-a-backbone")


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_every_architecture_trains(backbone):
    """create -> forward on a conditional batch -> backward: a finite gradient on every trainable parameter, and a
    non-zero one on the head and the encoder's last layer (the `cls` feature depends on them)."""
    model = create_model("cross-encoder", backbone=backbone, use_transform=True).train()
    rows = ROWS[:2]
    out = model(**_batch(load_tokenizer(backbone), rows), labels=torch.tensor([r["label"] for r in rows]))
    assert out.logits.shape == (2, 1) and torch.isfinite(out.loss)
    out.loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), backbone
    assert all(grads[name].any() for name in grads if name.startswith("head.")), backbone
    assert sum(bool(g.any()) for name, g in grads.items() if name.startswith("backbone.")) > 0


@pytest.mark.parametrize(
    "backbone, fields, activation",
    [
        ("tiny-bert", {"hidden_dropout_prob": 0.3, "hidden_act": "relu"}, "relu"),
        ("tiny-distilbert", {"dropout": 0.3, "activation": "relu"}, "relu"),
        ("tiny-modernbert", {"mlp_dropout": 0.3, "hidden_activation": "silu"}, "silu"),
        ("tiny-albert", {"hidden_dropout_prob": 0.3, "hidden_act": "relu"}, "relu"),
    ],
)
def test_head_reads_the_architectures_own_dropout_and_activation(backbone, fields, activation):
    """The head's dropout and transform activation come from the backbone config's own field names;
    `classifier_dropout` replaces the transform's dropout only."""
    backbone_config = tiny_backbone_config(backbone)
    for name, value in fields.items():
        setattr(backbone_config, name, value)
    head = ConditionalSimilarityHead(CrossEncoderConfig(backbone_config=backbone_config, use_transform=True))
    assert head.dropout.p == 0.3 and head.transform[0].p == 0.3
    assert type(head.transform[2]) is type(ACT2FN[activation])
    config = CrossEncoderConfig(backbone_config=backbone_config, use_transform=True, classifier_dropout=0.1)
    own = ConditionalSimilarityHead(config)
    assert own.transform[0].p == 0.1 and own.dropout.p == 0.3
