"""The C-STS cross-encoder baseline: harness, head equations, and config validation."""

import pytest
import torch
from model_harness import ROWS, ModelHarness

from pairzoo import CrossEncoderConfig, create_model, encode_conditional_inputs, load_tokenizer


class TestCrossEncoder(ModelHarness):
    model_name = "cross-encoder"


class TestCrossEncoderClassification(ModelHarness):
    model_name = "cross-encoder"
    config_overrides = {"num_labels": 3, "use_transform": True, "pooling": "mean"}


def test_regression_head_recomputed_from_parameters():
    """score = label_min + (label_max - label_min) * (W h_[CLS] + b); MSE against (y - 1) / 4."""
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_conditional_inputs(
        tokenizer, *zip(*[(r["sentence1"], r["sentence2"], r["condition"]) for r in ROWS])
    )
    labels = torch.tensor([r["label"] for r in ROWS])
    with torch.no_grad():
        out = model(**batch, labels=labels)
        cls = model.backbone(**batch).last_hidden_state[:, 0]
        logits = cls @ model.head.classifier.weight.T + model.head.classifier.bias
    torch.testing.assert_close(out.logits, logits.squeeze(-1))
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
