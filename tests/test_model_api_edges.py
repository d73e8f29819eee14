"""The transformers model API as a transformers user exercises it on every family: gradient checkpointing (the same
gradients, the layers really recomputed, also where a method runs the layers itself with a hook), new tokens and
`resize_token_embeddings` (with the MLM head of neighbor attention), `output_hidden_states` / `output_attentions`
from the config, sharded saves, bf16 under the Trainer, trainable-parameter counts and float64."""

import json
import math

import pytest
import torch
from datasets import Dataset
from model_harness import assert_close_after_reload
from test_model_api import ROWS, TINY
from transformers import Trainer, TrainingArguments

from pairzoo import create_model, get_model_spec, load_tokenizer
from pairzoo.backbones import tiny_backbone_config
from pairzoo.modeling.encoders import layer_list, output_projection
from pairzoo.training import make_collator, tokenize_dataset

NEW_TOKENS = ["zorblaxian", "quuxifying"]
NEW_SPECIAL = "[EXTRA]"


def _rows(name: str, config, suffix: str = "") -> "list[dict]":
    """`ROWS` with labels for `config` (and `suffix` after each first sentence), without the condition for a
    pair-only family, as `test_model_api` builds them."""
    if config.num_labels > 1:
        labels = [i % config.num_labels for i in range(len(ROWS))]
    else:
        labels = [config.label_min + 0.25 * (config.label_max - config.label_min), config.label_max]
    conditional = any(task.startswith("conditional") for task in get_model_spec(name).training_tasks)
    rows = [{**row, "sentence1": row["sentence1"] + suffix, "label": label} for row, label in zip(ROWS, labels)]
    return rows if conditional else [{k: v for k, v in row.items() if k != "condition"} for row in rows]


def _batch(model, name: str, tokenizer, suffix: str = "") -> dict:
    return make_collator(model, tokenizer, 32)(_rows(name, model.config, suffix))


def _model_without_dropout(name: str, backbone: str, **overrides):
    """`create_model(name, backbone=...)` with every dropout probability zero (the backbone's and the method's)."""
    backbone_config = tiny_backbone_config(backbone)
    backbone_config.hidden_dropout_prob = backbone_config.attention_probs_dropout_prob = 0.0
    spec = get_model_spec(name)
    config = spec.config_class(
        backbone_config=backbone_config, **{**spec.defaults, **TINY[name], "classifier_dropout": 0.0, **overrides}
    )
    return spec.model_class(config)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """These tiny models run fastest on one intra-op thread (on a busy machine two threads wait on each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _gradients(model, batch: dict) -> "dict[str, torch.Tensor]":
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the same random draws in both steps (neighbor attention samples in training)
    model(**batch).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


GRADIENT_CASES = [
    ("cross-encoder", "tiny-bert", {}, False),
    ("seaver", "tiny-roberta", {}, False),
    ("comateformer", "tiny-deberta-v2", {}, False),
    ("csr", "tiny-bert", {}, False),
    ("csr", "tiny-bert", {}, True),
    ("csr", "tiny-roberta", {"architecture": "bi", "router_layers": [0, 1]}, False),
    ("csr", "tiny-bert", {"router": "reference"}, True),
    ("csr", "tiny-deberta-v2", {}, False),
    ("neighbor-attention", "tiny-bert", {}, False),
    ("neighbor-attention", "tiny-roberta", {}, True),
    ("neighbor-attention", "tiny-deberta-v2", {}, False),
]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers' deprecated `gradient_checkpointing_*` names
@pytest.mark.parametrize("name, backbone, overrides, reentrant", GRADIENT_CASES)
def test_gradient_checkpointing_recomputes_every_layer_and_keeps_the_gradients(name, backbone, overrides, reentrant):
    """In float64 without dropout the checkpointed step has the plain step's loss and gradients (all of them, the
    method's own parameters included), and every backbone layer runs again in the backward pass: also where the
    method runs a layer itself with a hook on it (CSR's routers, neighbor attention), under reentrant checkpointing
    too, which differentiates only what a checkpointed call takes as input."""
    model = _model_without_dropout(name, backbone, **overrides).double().train()
    batch = _batch(model, name, load_tokenizer(backbone))
    expected = _gradients(model, batch)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    assert model.is_activation_checkpointing
    layers = range(len(layer_list(model.backbone)))
    calls = {index: 0 for index in layers}
    handles = [
        output_projection(model.backbone, index).register_forward_pre_hook(
            lambda module, args, index=index: calls.__setitem__(index, calls[index] + 1)
        )
        for index in layers
    ]
    try:
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        loss = model(**batch).loss
        forward_calls = dict(calls)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    assert all(forward_calls[index] > 0 for index in layers)
    assert {index: calls[index] - forward_calls[index] for index in layers} == forward_calls  # each run once more
    actual = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert sorted(actual) == sorted(expected)
    for key, gradient in expected.items():
        torch.testing.assert_close(actual[key], gradient, rtol=1e-9, atol=1e-12, msg=key)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", ["csr", "neighbor-attention"])
def test_trainer_gradient_checkpointing_trains_methods_that_hook_layers(name, tmp_path):
    model = create_model(name, backbone="tiny-bert", **TINY[name])
    tokenizer = load_tokenizer("tiny-bert")
    rows = _rows(name, model.config) * 2
    args = TrainingArguments(
        str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        report_to="none",
        gradient_checkpointing=True,
        dataloader_pin_memory=False,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=tokenize_dataset(Dataset.from_list(rows), model, tokenizer, max_length=32),
        data_collator=make_collator(model, tokenizer, 32),
    )
    result = trainer.train()
    assert model.is_activation_checkpointing and math.isfinite(result.training_loss)


@pytest.mark.parametrize(
    "name, backbone, message",
    [
        ("siamese-matcher", "tiny-bert", "does not support activation checkpointing"),
        ("csr", "tiny-mpnet", "the mpnet backbone \\(MPNetModel\\) has no gradient checkpointing in transformers"),
        ("cross-encoder", "tiny-albert", "the albert backbone \\(AlbertModel\\) has no gradient checkpointing"),
    ],
)
def test_gradient_checkpointing_without_checkpointed_layers_is_refused(name, backbone, message):
    """A matcher without transformer layers and a backbone whose layers transformers cannot checkpoint (MPNet)."""
    model = create_model(name, backbone=backbone, **TINY[name])
    with pytest.raises(ValueError, match=message):
        model.activation_checkpointing_enable()
    assert not model.is_activation_checkpointing


@pytest.mark.parametrize("name", list(TINY))
def test_new_tokens_resize_the_embeddings_and_survive_a_save(name, tmp_path):
    model = create_model(name, backbone="tiny-bert", **TINY[name]).eval()
    tokenizer = load_tokenizer("tiny-bert")
    old_size = model.get_input_embeddings().num_embeddings
    tokenizer.add_tokens(NEW_TOKENS)
    tokenizer.add_special_tokens({"additional_special_tokens": [NEW_SPECIAL]})
    size = len(tokenizer)
    returned = model.resize_token_embeddings(size)
    assert returned is model.get_input_embeddings() and returned.num_embeddings == size > old_size
    assert model.config.backbone_config.vocab_size == size
    assert model.get_input_embeddings() is (
        model.embeddings if name == "siamese-matcher" else model.backbone.embeddings.word_embeddings
    )
    batch = _batch(model, name, tokenizer, suffix=f" {NEW_TOKENS[0]} {NEW_SPECIAL}")
    new_ids = [i for i in range(old_size, size) if i in batch["input_ids"]]
    assert new_ids  # the collator's id check accepts the new ids
    with torch.no_grad():
        logits = model(**batch).logits
    assert bool(torch.isfinite(logits).all())
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "vocab_size" not in saved or name == "siamese-matcher"
    reloaded = type(model).from_pretrained(tmp_path).eval()
    assert reloaded.get_input_embeddings().num_embeddings == size
    with torch.no_grad():
        assert_close_after_reload(reloaded(**batch).logits, logits)


@pytest.mark.parametrize("tied", [True, False])
def test_resizing_neighbor_attention_keeps_its_mlm_head_consistent(tied, tmp_path):
    """The [MASK] decoding covers the new tokens: a decoder tied to the input embeddings reads the resized matrix and
    its bias grows with zeros, an untied decoder (`get_output_embeddings`) is resized with the input embeddings;
    the old tokens' logits are unchanged, the head stays frozen, and a save keeps it all."""
    backbone_config = tiny_backbone_config("tiny-bert")
    backbone_config.tie_word_embeddings = tied
    spec = get_model_spec("neighbor-attention")
    model = spec.model_class(spec.config_class(backbone_config=backbone_config, **TINY["neighbor-attention"])).eval()
    old_size = backbone_config.vocab_size
    states = torch.randn(2, backbone_config.hidden_size)
    before = model.decode_mask_logits(states)
    decoder = model.get_output_embeddings()
    assert decoder is None if tied else isinstance(decoder, torch.nn.Linear)
    model.resize_token_embeddings(old_size + 3, pad_to_multiple_of=8)
    size = model.get_input_embeddings().num_embeddings
    assert size == old_size + 6 == model.config.backbone_config.vocab_size  # padded to a multiple of 8
    after = model.decode_mask_logits(states)
    assert after.shape == (2, size)
    torch.testing.assert_close(after[:, :old_size], before)
    if not tied:
        assert model.get_output_embeddings().weight.shape == (size, backbone_config.hidden_size)
    vocabulary_sized = [p.shape[0] for p in model.lm_head.parameters() if p.dim() == 1 and p.shape[0] > 32]
    assert vocabulary_sized and set(vocabulary_sized) == {size}  # the decoder's bias (and a second one, untied)
    assert not any(p.requires_grad for p in model.lm_head.parameters())
    assert not model.get_input_embeddings().weight.requires_grad  # the encoder stays frozen
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded.decode_mask_logits(states), after)


@pytest.mark.parametrize("name", ["cross-encoder", "neighbor-attention"])
def test_set_input_embeddings_reaches_the_backbone_and_the_tied_decoder(name):
    model = create_model(name, backbone="tiny-bert", **TINY[name]).eval()
    old = model.get_input_embeddings()
    new = torch.nn.Embedding(old.num_embeddings, old.embedding_dim, padding_idx=old.padding_idx)
    model.set_input_embeddings(new)
    assert model.get_input_embeddings() is new is model.backbone.get_input_embeddings()
    if name == "neighbor-attention":  # the tied decoder reads the new matrix
        states = torch.randn(2, old.embedding_dim)
        expected = model.decode_mask_logits(states)
        with torch.no_grad():
            new.weight.mul_(2.0)
        assert not torch.allclose(model.decode_mask_logits(states), expected)


def test_neighbor_attention_refuses_output_embeddings_it_does_not_have():
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY["neighbor-attention"])
    with pytest.raises(ValueError, match="decoded through the input embeddings"):
        model.set_output_embeddings(torch.nn.Linear(32, 10))


OUTPUT_FLAGS = {
    "comateformer": ("output_hidden_states", "output_attentions"),
    "cross-encoder": ("output_hidden_states", "output_attentions"),
    "seaver": ("output_hidden_states", "output_attentions"),
    "neighbor-attention": ("output_hidden_states",),
    "csr": (),
    "siamese-matcher": (),
}


@pytest.mark.parametrize("name", list(TINY))
def test_output_flags_on_the_config_are_honoured_or_refused(name, tmp_path):
    """`from_pretrained(path, output_hidden_states=True)` (or `output_attentions`) sets the config's flag, which a
    forward called without the argument reads, as transformers models do; where the forward cannot return them it
    is a ValueError naming the flag, not an output without them."""
    implementation = {} if name == "siamese-matcher" else {"attn_implementation": "eager"}
    model = create_model(name, backbone="tiny-bert", **TINY[name], **implementation).eval()
    batch = _batch(model, name, load_tokenizer("tiny-bert"))
    model.save_pretrained(tmp_path)
    for flag in ("output_hidden_states", "output_attentions"):
        reloaded = type(model).from_pretrained(tmp_path, **{flag: True}).eval()
        field = flag[len("output_") :]
        if flag not in OUTPUT_FLAGS[name]:
            with pytest.raises(ValueError, match=f"`{flag}` is True on the config"):
                reloaded(**batch)
            continue
        with torch.no_grad():
            from_config = getattr(reloaded(**batch), field)
            from_argument = getattr(model(**batch, **{flag: True}), field)
        layers = model.config.backbone_config.num_hidden_layers
        assert isinstance(from_config, tuple) and len(from_config) == layers + (flag == "output_hidden_states")
        for state, expected in zip(from_config, from_argument):
            assert_close_after_reload(state, expected)


def test_the_output_flag_check_reads_the_forward_the_class_has_now():
    """A forward wrapped on the class for a while (a patch, a profiler) and then restored: the config's
    `output_hidden_states` is honoured again, not refused from what the wrapper's signature said."""
    base = get_model_spec("cross-encoder").model_class

    class Wrapped(base):
        def forward(self, *args, **kwargs):
            return base.forward(self, *args, **kwargs)

    model = create_model("cross-encoder", backbone="tiny-bert", **TINY["cross-encoder"]).eval()
    model.__class__ = Wrapped
    batch = _batch(model, "cross-encoder", load_tokenizer("tiny-bert"))
    with torch.no_grad():
        model(**batch)
        del Wrapped.forward
        model.config.output_hidden_states = True
        states = model(**batch).hidden_states
    assert isinstance(states, tuple) and len(states) == model.config.backbone_config.num_hidden_layers + 1


@pytest.mark.parametrize("name", list(TINY))
def test_a_sharded_save_loads_back_the_same_model(name, tmp_path):
    model = create_model(name, backbone="tiny-bert", **TINY[name]).eval()
    batch = _batch(model, name, load_tokenizer("tiny-bert"))
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    reloaded = type(model).from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert_close_after_reload(reloaded(**batch).logits, model(**batch).logits)
    if name == "neighbor-attention":  # the tied decoder reads the reloaded input embeddings
        states = torch.randn(2, model.config.backbone_config.hidden_size)
        assert_close_after_reload(reloaded.decode_mask_logits(states), model.decode_mask_logits(states))


def test_bf16_trainer_on_cpu_trains_with_a_finite_loss(tmp_path):
    model = create_model("seaver", backbone="tiny-bert", **TINY["seaver"])
    tokenizer = load_tokenizer("tiny-bert")
    args = TrainingArguments(
        str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        report_to="none",
        bf16=True,
        use_cpu=True,
        dataloader_pin_memory=False,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=tokenize_dataset(Dataset.from_list(_rows("seaver", model.config) * 2), model, tokenizer, 32),
        data_collator=make_collator(model, tokenizer, 32),
    )
    assert math.isfinite(trainer.train().training_loss) and trainer.state.global_step == 2


def test_trainable_parameter_counts_follow_requires_grad():
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY["neighbor-attention"])
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    method = sum(
        p.numel()
        for part in (model.neighbor_projections, model.neighbor_transform, model.neighbor_layer_norm, model.classifier)
        for p in part.parameters()
    )
    assert model.num_parameters(only_trainable=True) == trainable == method < model.num_parameters()
    model = create_model("cross-encoder", backbone="tiny-bert")
    model.backbone.requires_grad_(False)
    head = sum(p.numel() for p in model.head.parameters())
    assert model.num_parameters(only_trainable=True) == head
    assert model.num_parameters() == head + sum(p.numel() for p in model.backbone.parameters())


@pytest.mark.parametrize("name", list(TINY))
def test_float64_forward_matches_float32(name):
    model = create_model(name, backbone="tiny-bert", **TINY[name]).eval()
    batch = _batch(model, name, load_tokenizer("tiny-bert"))
    with torch.no_grad():
        expected = model(**batch).logits
        actual = model.to(torch.float64)(**batch).logits
    assert actual.dtype == torch.float64
    torch.testing.assert_close(actual.float(), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", [n for n in TINY if n != "csr"])  # CSR has one score, never classes
def test_a_saved_model_loads_with_a_new_head_for_other_labels(name, tmp_path):
    """transformers' recipe for another label set, `from_pretrained(path, num_labels=...,
    ignore_mismatched_sizes=True)`, gives a new head; its problem type follows the new labels, not the saved head's
    (a saved regressor's `problem_type="regression"` would refuse three classes)."""
    saved = {"num_labels": 2} if name == "neighbor-attention" else {"num_labels": 1, "problem_type": "regression"}
    model = create_model(name, backbone="tiny-bert", **{**TINY[name], **saved})
    model.save_pretrained(tmp_path)
    labels = {0: "a", 1: "b", 2: "c"}
    for kwargs in ({"num_labels": 3}, {"id2label": labels}):
        reloaded = type(model).from_pretrained(tmp_path, ignore_mismatched_sizes=True, **kwargs)
        assert reloaded.config.num_labels == 3
        assert reloaded.config.problem_type in (None, "single_label_classification")
        batch = _batch(reloaded, name, load_tokenizer("tiny-bert"))
        output = reloaded(**batch)
        assert output.logits.shape == (len(ROWS), 3) and torch.isfinite(output.loss)
    if name == "neighbor-attention":  # a classifier of two classes: its label names stay at its own width
        assert type(model).from_pretrained(tmp_path, num_labels=2).config.id2label == model.config.id2label
        return
    assert type(model).from_pretrained(tmp_path).config.problem_type == "regression"  # kept when nothing changes
    with pytest.raises(ValueError, match="'regression' does not fit `num_labels` = 3: give the problem type"):
        type(model).from_pretrained(tmp_path, num_labels=3, problem_type="regression", ignore_mismatched_sizes=True)
