"""pairzoo models fine-tuned with PEFT's LoRA, as transformers users fine-tune sequence classifiers: adapters on the
backbone's attention projections with `task_type="SEQ_CLS"`, and the method's own modules kept training through
`modules_to_save=model.method_modules()`.

Each method must read the adapted projections through the modules themselves: the adapted model scores as the model
with the adapters merged into its weights. Training reaches every adapter and every method module; without the
method's modules in `modules_to_save`, PEFT would freeze them, and the model says so once.
"""

import copy
import logging

import pytest
import torch
from architecture_cells import EXPECTED_REFUSALS, FAMILIES, _check_train_steps, pipeline_examples, tokenizer_of
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import pipeline

from pairzoo import create_model, get_model_spec

ARCHITECTURES = ("tiny-bert", "tiny-deberta-v2", "tiny-modernbert")  # separate, relative-position and fused q/k/v
FAMILY_NAMES = [name for name in FAMILIES if not name.startswith("siamese")]  # no transformer backbone to adapt
CELLS = [(f, a) for f in FAMILY_NAMES for a in ARCHITECTURES if (f, a) not in EXPECTED_REFUSALS]
# the attention projections of each architecture (PEFT's own per-architecture defaults do not know pairzoo models)
TARGETS = {
    "tiny-bert": ["query", "key", "value"],
    "tiny-deberta-v2": ["query_proj", "key_proj", "value_proj"],
    "tiny-modernbert": ["Wqkv"],
}
LOGGER = "pairzoo.modeling.common"


def _model_and_batch(family: str, architecture: str):
    spec = FAMILIES[family]
    torch.manual_seed(0)
    model = create_model(spec.model, backbone=architecture, **spec.overrides).eval()
    pipeline_task = get_model_spec(spec.model).entry_points(spec.task)[1]
    scorer = pipeline(pipeline_task, model=model, tokenizer=tokenizer_of(architecture))
    batch = scorer.encode(pipeline_examples(pipeline_task), max_length=64)
    num_labels = model.config.num_labels
    batch["labels"] = torch.tensor([0, num_labels - 1]) if num_labels > 1 else torch.tensor([2.0, 4.0])
    return model, batch


def _lora(model, architecture: str, method_modules: bool = True, random_init: bool = False):
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=TARGETS[architecture],
        task_type="SEQ_CLS",
        modules_to_save=model.method_modules() if method_modules else None,
        init_lora_weights=not random_init,  # random B: the adapters change the output from the first step
    )
    return get_peft_model(copy.deepcopy(model), config)


@pytest.mark.parametrize(("family", "architecture"), CELLS)
def test_the_adapted_model_scores_as_its_merged_weights(family, architecture):
    model, batch = _model_and_batch(family, architecture)
    adapted = _lora(model, architecture, random_init=True).eval()
    with torch.no_grad():
        base = model(**batch).logits
        lora = adapted(**batch).logits
        merged = adapted.merge_and_unload().eval()(**batch).logits
    assert (lora - base).abs().max() > 1e-4  # the adapters are read at all
    torch.testing.assert_close(lora, merged, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("family", "architecture"), CELLS)
def test_training_reaches_every_adapter_and_every_method_module(family, architecture, caplog):
    model, batch = _model_and_batch(family, architecture)
    adapted = _lora(model, architecture)
    trainable = {n for n, p in adapted.named_parameters() if p.requires_grad}
    for name in model.method_modules():  # each method module has a trainable copy
        assert any(f".{name}.modules_to_save." in n for n in trainable), (name, sorted(trainable))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _check_train_steps(adapted, batch)  # every trainable parameter gets a gradient and moves, no frozen one
    assert not [r for r in caplog.records if r.name == LOGGER]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_method_module_left_frozen_by_peft_is_named_once(family, caplog):
    """With `task_type="SEQ_CLS"` alone PEFT keeps only modules named `classifier` or `score` training; the model
    warns once, naming the others, on its first training step."""
    model, batch = _model_and_batch(family, "tiny-bert")
    frozen = [name for name in model.method_modules() if not name.endswith(("classifier", "score"))]
    adapted = _lora(model, "tiny-bert", method_modules=False).train()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        adapted(**batch)
        adapted(**batch)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    if not frozen:
        assert messages == []
        return
    assert len(messages) == 1 and "modules_to_save=model.method_modules()" in messages[0]
    assert all(repr(name) in messages[0] for name in frozen)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_saved_adapters_reload_onto_the_saved_model_with_the_same_scores(family, tmp_path):
    model, batch = _model_and_batch(family, "tiny-bert")
    model.save_pretrained(tmp_path / "base")
    adapted = _lora(model, "tiny-bert", random_init=True)
    _check_train_steps(adapted, batch)  # the method modules' copies move: they must be saved with the adapters
    adapted.save_pretrained(tmp_path / "adapters")
    base = type(model).from_pretrained(tmp_path / "base")
    reloaded = PeftModel.from_pretrained(base, tmp_path / "adapters").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, adapted.eval()(**batch).logits, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_transformers_usual_arguments_left_none_are_accepted_and_given_ones_refused(family):
    """Wrappers (PEFT's sequence classifier) pass `input_ids`, `attention_mask`, `inputs_embeds` and the output flags
    whether or not the model takes them: None is not giving them; a value the model cannot take is refused."""
    model, batch = _model_and_batch(family, "tiny-bert")
    unset = {"input_ids": None, "attention_mask": None, "inputs_embeds": None, "token_type_ids": None}
    unset |= {"position_ids": None, "output_attentions": None, "output_hidden_states": None}
    given = {k: v for k, v in batch.items() if k not in unset or v is not None}
    with torch.no_grad():
        torch.testing.assert_close(model(**{**unset, **given}).logits, model(**batch).logits)
        with pytest.raises(TypeError, match="inputs_embeds"):
            model(**batch, inputs_embeds=torch.zeros(2, 3, model.config.backbone_config.hidden_size))


def test_method_modules_leave_out_what_the_method_keeps_frozen():
    """Listing a module the method keeps frozen would let PEFT train a copy of it: neighbor attention's MLM head,
    the Siamese matcher's word embeddings under `freeze_embeddings`."""
    spec = FAMILIES["neighbor-attention"]
    model = create_model(spec.model, backbone="tiny-bert", **spec.overrides)
    assert model.lm_head is not None and not any(name.startswith("lm_head") for name in model.method_modules())
    siamese = FAMILIES["siamese-re2-sfa"]
    for freeze in (True, False):
        model = create_model(siamese.model, backbone="tiny-bert", **siamese.overrides, freeze_embeddings=freeze)
        assert ("embeddings" in model.method_modules()) == (not freeze)
