"""The tiny random test backbones: one per encoder architecture, each with a tokenizer of its own kind."""

import copy
import functools
import hashlib
import json

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from pairzoo import create_model, list_backbones, load_tokenizer
from pairzoo.backbones import _TINY_TOKENIZERS, TINY_ARCHITECTURES, TINY_BACKBONES, tiny_backbone_config

FIRST = "Two women in red dresses are dancing on a busy street."
SECOND = "The colour of the clothing."

# name: (config model_type, tokenizer class, first token, tokens between the segments, last token, token types).
LAYOUTS = {
    "tiny-bert": ("bert", "BertTokenizer", "[CLS]", ["[SEP]"], "[SEP]", True),
    "tiny-roberta": ("roberta", "RobertaTokenizer", "<s>", ["</s>", "</s>"], "</s>", False),
    "tiny-xlm-roberta": ("xlm-roberta", "XLMRobertaTokenizer", "<s>", ["</s>", "</s>"], "</s>", False),
    "tiny-deberta-v2": ("deberta-v2", "DebertaV2Tokenizer", "[CLS]", ["[SEP]"], "[SEP]", True),
    "tiny-electra": ("electra", "BertTokenizer", "[CLS]", ["[SEP]"], "[SEP]", True),
    "tiny-electra-small": ("electra", "BertTokenizer", "[CLS]", ["[SEP]"], "[SEP]", True),
    "tiny-mpnet": ("mpnet", "MPNetTokenizer", "<s>", ["</s>", "</s>"], "</s>", False),
    "tiny-distilbert": ("distilbert", "DistilBertTokenizer", "[CLS]", ["[SEP]"], "[SEP]", False),
    "tiny-modernbert": ("modernbert", "TokenizersBackend", "[CLS]", ["[SEP]"], "[SEP]", False),
    "tiny-albert": ("albert", "AlbertTokenizer", "[CLS]", ["[SEP]"], "[SEP]", False),
}
UNCASED = {"tiny-bert", "tiny-electra", "tiny-electra-small", "tiny-mpnet", "tiny-distilbert", "tiny-albert"}


@functools.cache
def _encoder(name: str):
    """A random encoder of `name`'s tiny config in eval mode (built once; the tests only read it)."""
    return AutoModel.from_config(tiny_backbone_config(name)).eval()


def test_names_are_listed_in_order_and_accepted_everywhere():
    assert TINY_ARCHITECTURES == tuple(LAYOUTS)
    assert set(TINY_BACKBONES) == set(TINY_ARCHITECTURES)
    assert set(TINY_ARCHITECTURES) <= set(list_backbones())
    with pytest.raises(ValueError, match="Unknown tiny backbone 'tiny-gpt2'.*tiny-albert"):
        tiny_backbone_config("tiny-gpt2")


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_tokenizer_encodes_a_pair_with_its_own_template(name):
    _, tokenizer_class, first, middle, last, token_types = LAYOUTS[name]
    tokenizer = load_tokenizer(name)
    assert type(tokenizer).__name__ == tokenizer_class
    first_ids = tokenizer(FIRST, add_special_tokens=False)["input_ids"]
    second_ids = tokenizer(SECOND, add_special_tokens=False)["input_ids"]
    encoded = tokenizer(FIRST, SECOND)
    special = tokenizer.convert_tokens_to_ids([first, *middle, last])
    assert encoded["input_ids"] == [special[0], *first_ids, *special[1:-1], *second_ids, special[-1]]
    assert tokenizer.unk_token_id not in encoded["input_ids"]
    assert ("token_type_ids" in encoded) is token_types
    if token_types:
        first_part = 1 + len(first_ids) + len(middle)
        assert encoded["token_type_ids"] == [0] * first_part + [1] * (len(second_ids) + 1)
    for text, ids in ((FIRST, first_ids), (SECOND, second_ids)):
        assert tokenizer.decode(ids) == (text.lower() if name in UNCASED else text)
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]).count(last) == len(middle) + 1


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_config_matches_its_tokenizer_and_the_model_runs_on_a_pair(name):
    tokenizer = load_tokenizer(name)
    config = tiny_backbone_config(name)
    assert config.model_type == LAYOUTS[name][0]
    assert config._name_or_path == name
    assert config.vocab_size == len(tokenizer)
    assert config.pad_token_id == tokenizer.pad_token_id
    if name == "tiny-modernbert":  # no <s>/</s>: [CLS] and [SEP] stand for them, as in ModernBERT's checkpoints
        assert (config.bos_token_id, config.eos_token_id) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
        assert (config.cls_token_id, config.sep_token_id) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
    elif name != "tiny-bert":  # tiny-bert's config is BERT's defaults besides its sizes
        assert (config.bos_token_id, config.eos_token_id) == (tokenizer.bos_token_id, tokenizer.eos_token_id)
    model = _encoder(name)
    encoded = tokenizer(FIRST, SECOND, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    assert hidden.shape == (1, encoded["input_ids"].shape[1], 32)
    assert torch.isfinite(hidden).all()


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_padding_leaves_the_outputs_of_the_shorter_pair_unchanged(name):
    """Right padding with the tokenizer's pad id and mask must not move positions or leak into attention (MPNet's
    and XLM-R's positions start past the padding id, so a wrong pad id shows here)."""
    tokenizer = load_tokenizer(name)
    model = _encoder(name)
    batch = tokenizer([SECOND, FIRST], [SECOND, FIRST], padding=True, return_tensors="pt")
    alone = tokenizer(SECOND, SECOND, return_tensors="pt")
    length = alone["input_ids"].shape[1]
    assert length < batch["input_ids"].shape[1]
    assert (batch["input_ids"][0, length:] == tokenizer.pad_token_id).all()
    with torch.no_grad():
        padded = model(**batch).last_hidden_state[0, :length]
        single = model(**alone).last_hidden_state[0]
    torch.testing.assert_close(padded, single, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_tokenizer_round_trips_through_save_pretrained(name, tmp_path):
    tokenizer = load_tokenizer(name)
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(reloaded) is type(tokenizer)
    assert reloaded.get_vocab() == tokenizer.get_vocab()
    assert reloaded.all_special_tokens == tokenizer.all_special_tokens
    texts = ([FIRST, SECOND, "Unseen words: Zürich, 42!"], [SECOND, FIRST, SECOND])
    assert dict(reloaded(*texts, padding=True)) == dict(tokenizer(*texts, padding=True))


def _digest(tokenizer) -> str:
    """The whole `tokenizers` pipeline of `tokenizer` (vocabulary included, less the padding and truncation a call
    leaves set) and a pair's ids, hashed."""
    pipeline = json.loads(tokenizer.backend_tokenizer.to_str())
    pipeline.pop("padding")
    pipeline.pop("truncation")
    state = (pipeline, dict(tokenizer(FIRST, SECOND)))
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_tokenizer_is_cached_and_rebuilt_identically(name):
    """A second build gives the same tokenizer (the `tokenizers` trainers iterate hash maps whose order changes from
    one map to the next, so an order-dependent vocabulary shows here); each load is a copy of the cached build."""
    tokenizer = load_tokenizer(name)
    if name == "tiny-bert":  # MiniLM's tokenizer, read from its folder on each call
        rebuilt = load_tokenizer(name)
    else:
        assert load_tokenizer(name) is not tokenizer and _TINY_TOKENIZERS[name]() is _TINY_TOKENIZERS[name]()
        rebuilt = _TINY_TOKENIZERS[name].__wrapped__()  # built again, past the cache
        assert rebuilt is not tokenizer
    assert rebuilt.get_vocab() == tokenizer.get_vocab()
    assert _digest(rebuilt) == _digest(tokenizer)


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_create_model_builds_a_pairzoo_model_on_each(name):
    model = create_model("cross-encoder", backbone=name)
    assert model.config.backbone_config._name_or_path == name
    assert model.config.backbone_config.model_type == LAYOUTS[name][0]


def _encoder_params(name: str) -> dict[str, torch.Size]:
    return {key: value.shape for key, value in _encoder(name).named_parameters()}


def test_electra_small_projects_narrower_embeddings_and_electra_does_not():
    small, plain = _encoder_params("tiny-electra-small"), _encoder_params("tiny-electra")
    assert small["embeddings.word_embeddings.weight"][1] == 16
    assert small["embeddings_project.weight"] == (32, 16)
    assert plain["embeddings.word_embeddings.weight"][1] == 32
    assert not any(key.startswith("embeddings_project") for key in plain)


def test_albert_factorises_embeddings_and_shares_one_layer_group():
    params = _encoder_params("tiny-albert")
    assert params["embeddings.word_embeddings.weight"][1] == 16
    assert params["encoder.embedding_hidden_mapping_in.weight"] == (32, 16)
    assert {key.split(".")[2] for key in params if key.startswith("encoder.albert_layer_groups.")} == {"0"}


def test_deberta_v2_uses_bucketed_relative_positions_only():
    config = tiny_backbone_config("tiny-deberta-v2")
    params = _encoder_params("tiny-deberta-v2")
    assert params["encoder.rel_embeddings.weight"] == (2 * config.position_buckets, 32)
    assert not any("position_embeddings" in key or "token_type" in key for key in params)
    assert config.pos_att_type == ["p2c", "c2p"]


def test_modernbert_runs_a_global_and_a_local_attention_layer():
    """The second layer attends within a window of `local_attention` tokens: widening it changes the outputs of a
    pair longer than the window, while the first (global) layer's do not change."""
    config = tiny_backbone_config("tiny-modernbert")
    assert config.layer_types == ["full_attention", "sliding_attention"]
    tokenizer = load_tokenizer("tiny-modernbert")
    encoded = tokenizer(FIRST, SECOND, return_tensors="pt")
    assert encoded["input_ids"].shape[1] > config.local_attention
    local = AutoModel.from_config(config).eval()
    wide_config = copy.deepcopy(config)
    wide_config.local_attention = 512
    wide = AutoModel.from_config(wide_config).eval()
    wide.load_state_dict(local.state_dict())
    with torch.no_grad():
        narrow_out = local(**encoded, output_hidden_states=True).hidden_states
        wide_out = wide(**encoded, output_hidden_states=True).hidden_states
    torch.testing.assert_close(narrow_out[1], wide_out[1])
    assert (narrow_out[2] - wide_out[2]).abs().max() > 1e-4


@pytest.mark.parametrize("name", sorted(set(TINY_BACKBONES) - {"tiny-bert"}))
def test_tokens_added_to_a_loaded_tokenizer_reach_no_other_load(name):
    tokenizer = load_tokenizer(name)
    size = len(tokenizer)
    tokenizer.add_tokens(["<pairzoo-new-token>"])
    assert len(tokenizer) == size + 1
    again = load_tokenizer(name)
    assert len(again) == size and "<pairzoo-new-token>" not in again.get_vocab()
