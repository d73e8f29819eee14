"""One model API across the pairzoo families: `return_dict`, unknown keywords refused, `output_internals`,
`hidden_states` as transformers' per-layer tuple, regression logits of one shape, no loss keywords from the Trainer,
and input checks that read no tensor value on the forward pass."""

import inspect

import pytest
import torch
from transformers import Trainer, TrainingArguments

from pairzoo import create_model, get_model_spec, list_models, load_tokenizer
from pairzoo.modeling.common import check_forward_inputs, pool_hidden_states
from pairzoo.training import make_collator

ROWS = [
    {"sentence1": "A man plays a guitar.", "sentence2": "A man sings.", "condition": "The activity."},
    {"sentence1": "Two dogs run on a beach.", "sentence2": "A dog sleeps.", "condition": "The place."},
]
# Tiny settings per family (the defaults build full-size method parts) and whether it has a regression head.
TINY = {
    "comateformer": {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.5]},
    "cross-encoder": {},
    "csr": {},
    "neighbor-attention": {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "num_labels": 2},
    "seaver": {},
    "siamese-matcher": {"hidden_size": 64, "max_sequence_length": 32, "re2_blocks": 2, "sfa_reductions": [2, 2]},
}
# The internals `output_internals=True` adds, one field per family (the cross-encoder baseline has none).
INTERNALS = {
    "comateformer": "combined_attention",
    "csr": "router_weights",
    "neighbor-attention": "mask_hidden_state",
    "seaver": "reweighting_sentence",
}
REGRESSION = [name for name in TINY if name != "neighbor-attention"]


def test_every_registered_family_is_covered():
    assert sorted(TINY) == list_models()


def _model_and_batch(name: str, **overrides) -> "tuple[torch.nn.Module, dict]":
    model = create_model(name, backbone="tiny-bert", **TINY[name], **overrides).eval()
    config = model.config
    if config.num_labels > 1:
        labels = [i % config.num_labels for i in range(len(ROWS))]
    else:
        labels = [config.label_min + 0.25 * (config.label_max - config.label_min), config.label_max]
    conditional = any(task.startswith("conditional") for task in get_model_spec(name).training_tasks)
    rows = [{**row, "label": label} for row, label in zip(ROWS, labels)]
    if not conditional:  # what its pipeline and data sets give a pair-only model: no condition
        rows = [{key: value for key, value in row.items() if key != "condition"} for row in rows]
    return model, make_collator(model, load_tokenizer("tiny-bert"), 32)(rows)


def _assert_same(actual, expected) -> None:
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    else:
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)


@pytest.mark.parametrize("name", list(TINY))
def test_return_dict_false_returns_the_output_as_a_tuple(name):
    model, batch = _model_and_batch(name)
    with torch.no_grad():
        output = model(**batch, output_internals=True)
        as_tuple = model(**batch, output_internals=True, return_dict=False)
        assert isinstance(as_tuple, tuple) and as_tuple[0].dim() == 0  # the loss first, as labels were given
        _assert_same(as_tuple, output.to_tuple())
        model.config.return_dict = False
        _assert_same(model(**batch, output_internals=True), output.to_tuple())
        assert model(**batch, return_dict=True).logits is not None  # the argument wins over the config


@pytest.mark.parametrize("name", list(TINY))
def test_an_unknown_forward_keyword_is_refused_naming_it(name):
    model, batch = _model_and_batch(name)
    for keyword in ("output_internal", "output_reweighting", "output_details", "num_items_in_batch"):
        with pytest.raises(TypeError, match=keyword):
            model(**batch, **{keyword: True})


@pytest.mark.parametrize("name", list(TINY))
def test_output_internals_is_the_one_flag_for_a_methods_internals(name):
    model, batch = _model_and_batch(name)
    assert "output_internals" in inspect.signature(model.forward).parameters
    with torch.no_grad():
        plain = model(**batch)
        detailed = model(**batch, output_internals=True)
    torch.testing.assert_close(detailed.logits, plain.logits, rtol=0, atol=1e-6)
    if name in INTERNALS:
        assert getattr(plain, INTERNALS[name]) is None
        assert getattr(detailed, INTERNALS[name]) is not None
    else:
        assert set(detailed.keys()) == set(plain.keys())


@pytest.mark.parametrize("name", list(TINY))
def test_hidden_states_are_transformers_per_layer_tuple(name):
    model, batch = _model_and_batch(name)
    if "output_hidden_states" not in inspect.signature(model.forward).parameters:
        with pytest.raises(TypeError, match="output_hidden_states"):
            model(**batch, output_hidden_states=True)
        return
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True, output_internals=True)
    layers = model.config.backbone_config.num_hidden_layers
    assert isinstance(output.hidden_states, tuple) and len(output.hidden_states) == layers + 1
    width = model.config.backbone_config.hidden_size
    assert all(state.shape == (*batch["input_ids"].shape, width) for state in output.hidden_states)


@pytest.mark.parametrize("name", REGRESSION)
def test_regression_logits_are_batch_by_one_beside_label_scale_scores(name):
    model, batch = _model_and_batch(name, num_labels=1)
    with torch.no_grad():
        output = model(**batch)
    assert output.logits.shape == (2, 1) and output.scores.shape == (2,)
    span = model.config.label_max - model.config.label_min
    torch.testing.assert_close(output.scores, model.config.label_min + span * output.logits[:, 0])


@pytest.mark.parametrize("name", list(TINY))
def test_the_trainer_passes_no_loss_keywords(name, tmp_path):
    """Every loss is a batch mean: the Trainer must scale it for gradient accumulation itself and pass no
    `num_items_in_batch` (which the forward refuses)."""
    model, _ = _model_and_batch(name)
    trainer = Trainer(model=model, args=TrainingArguments(str(tmp_path), report_to="none", use_cpu=True))
    assert trainer.model_accepts_loss_kwargs is False


@pytest.mark.parametrize("name", list(TINY))
def test_forward_input_checks_read_no_tensor_value(name, monkeypatch):
    """The checks on every forward need only dtypes and shapes (no host-device synchronisation on an accelerator):
    they pass on meta tensors, which hold no value, while the value checks of `PAIRZOO_CHECK_INPUTS=1` read them."""
    model, batch = _model_and_batch(name)
    meta = {key: value.to("meta") for key, value in batch.items()}
    monkeypatch.delenv("PAIRZOO_CHECK_INPUTS", raising=False)
    check_forward_inputs(model, (), meta)
    monkeypatch.setenv("PAIRZOO_CHECK_INPUTS", "1")
    with pytest.raises(RuntimeError, match="meta"):
        check_forward_inputs(model, (), meta)


def test_mean_pooling_reads_only_the_tokens_the_mask_keeps():
    """Whatever padding positions hold (eager ModernBERT in float64 leaves NaN there) stays out of the mean."""
    hidden = torch.arange(24, dtype=torch.float64).view(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    expected = torch.stack([hidden[0, :2].mean(0), hidden[1, 0]])
    poisoned = hidden.clone()
    poisoned[0, 2], poisoned[1, 1:] = float("nan"), float("inf")
    torch.testing.assert_close(pool_hidden_states(poisoned, mask, "mean"), expected)
