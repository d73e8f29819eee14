"""CSR caches record the tokenizer that read their texts, and the CSR sentence-transformers module's outputs.

Each cache's metadata holds the tokenizer's class and source and a fingerprint of what turns its texts into ids (the
same after a call, a save and a reload, and in another process); `embed` refuses a sentence cache and a condition
cache read by different tokenizers (a tiny-roberta cache fits a tiny-bert model's vocabulary: wrong numbers, no
error) naming both, and a cache saved before caches recorded their tokenizer by the missing field. Loaded with
sentence-transformers without pairzoo, a CSR export refuses `output_value="token_embeddings"` (it has no per-token
states) by name, and `output_value=None` gives each input's features with the default `sentence_embedding`.
"""

import json

import pytest
import torch
from tokenizers import normalizers
from transformers import AutoTokenizer, set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.csr_cache import load_cache, save_cache
from pairzoo.hub_cards import export_model, run_without_pairzoo
from pairzoo.modeling.modeling_csr import tokenizer_fingerprint

SENTENCES = ["A man walks his dog in the park.", "Two women sing.", "x"]
CONDITIONS = ["The number of people.", "The activity."]
TOKENIZER_FIELDS = ("tokenizer", "tokenizer_fingerprint")

_SCRIPT = r"""
import json, sys
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer

folder, roberta, out, sentences, condition = json.loads(sys.argv[1])
model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
for name, path in (("own", folder), ("roberta", roberta)):
    cache = model.encode_sentences(sentences, AutoTokenizer.from_pretrained(path, trust_remote_code=True))
    save_file(cache.tensors(), f"{out}/{name}.safetensors", metadata=cache.metadata)

results = {}
def record(name, fn):
    try:
        results[name] = {"value": fn()}
    except Exception as err:
        kinds = [kind.__name__ for kind in (ValueError, KeyError) if isinstance(err, kind)]
        results[name] = {"error": f"{type(err).__name__}: {err}", "kinds": kinds}

st = SentenceTransformer(folder, trust_remote_code=True, device="cpu")
record("default", lambda: st.encode(sentences, prompt=condition).tolist())
record("token_embeddings", lambda: st.encode(sentences, prompt=condition, output_value="token_embeddings"))
record("all", lambda: [
    {key: value.tolist() for key, value in features.items()}
    for features in st.encode(sentences, prompt=condition, output_value=None)
])
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def bert():
    return load_tokenizer("tiny-bert")


@pytest.fixture(scope="module")
def roberta():
    return load_tokenizer("tiny-roberta")


@pytest.fixture(scope="module")
def model():
    set_seed(0)
    return create_model("csr", backbone="tiny-bert", architecture="tri", router_layers=[1], tri_head="hadamard").eval()


def _unlowered(tokenizer):
    """A copy of the tiny-bert tokenizer (same class, source and vocabulary) that keeps upper case."""
    copy = load_tokenizer("tiny-bert")
    copy.backend_tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
    assert copy.get_vocab() == tokenizer.get_vocab() and copy("A Cat")["input_ids"] != tokenizer("A Cat")["input_ids"]
    return copy


def _without_tokenizer(cache):
    """`cache` as an earlier pairzoo saved it: no tokenizer fields in its metadata."""
    metadata = {key: value for key, value in cache.metadata.items() if key not in TOKENIZER_FIELDS}
    return type(cache)(*cache.tensors().values(), metadata=metadata)


def test_the_fingerprint_is_what_turns_texts_into_ids(bert, roberta, tmp_path):
    own = tokenizer_fingerprint(bert)
    bert(SENTENCES, padding="max_length", max_length=40, truncation=True, padding_side="left")
    assert tokenizer_fingerprint(bert) == own  # a call's padding and truncation settings are not the tokenizer
    for tokenizer in (bert, roberta):
        tokenizer.save_pretrained(tmp_path / type(tokenizer).__name__)
        reloaded = AutoTokenizer.from_pretrained(tmp_path / type(tokenizer).__name__)
        assert tokenizer_fingerprint(reloaded) == tokenizer_fingerprint(tokenizer)
    assert tokenizer_fingerprint(roberta) != own
    assert tokenizer_fingerprint(_unlowered(bert)) != own  # same vocabulary, other ids for "A Cat"


def test_caches_record_their_tokenizer_through_a_file(model, bert, tmp_path):
    sentences, conditions = model.encode_sentences(SENTENCES, bert), model.encode_conditions(CONDITIONS, bert)
    for cache, name in ((sentences, "s"), (conditions, "c")):
        assert cache.metadata["tokenizer_fingerprint"] == tokenizer_fingerprint(bert)
        assert cache.metadata["tokenizer"] == f"BertTokenizer {bert.name_or_path!r}"
        assert load_cache(save_cache(cache, tmp_path / f"{name}.safetensors")).metadata == cache.metadata


@pytest.mark.parametrize("other_side", ["sentence", "condition"])
@pytest.mark.parametrize("other", ["tiny-roberta", "unlowered tiny-bert"])
def test_caches_of_different_tokenizers_are_refused_naming_both(model, bert, roberta, tmp_path, other_side, other):
    foreign = roberta if other == "tiny-roberta" else _unlowered(bert)
    ids = foreign(SENTENCES + CONDITIONS)["input_ids"]
    assert max(max(row) for row in ids) < model.config.backbone_config.vocab_size  # ids the model reads silently
    tokenizers = {"sentence": bert, "condition": bert, other_side: foreign}
    sentences = load_cache(save_cache(model.encode_sentences(SENTENCES, tokenizers["sentence"]), tmp_path / "s"))
    conditions = load_cache(save_cache(model.encode_conditions(CONDITIONS, tokenizers["condition"]), tmp_path / "c"))
    described = {
        side: f"{side} cache by {type(tokenizer).__name__}.*\\(tokenizer_fingerprint {fingerprint[:12]}\\)"
        for side, tokenizer in tokenizers.items()
        for fingerprint in [tokenizer_fingerprint(tokenizer)]
    }
    with pytest.raises(
        ValueError,
        match=f"tokenised by different tokenizers: {described['sentence']}, "
        f"{described['condition']}; encode both with the model's own tokenizer",
    ) as error:
        model.embed(sentences, conditions)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("old", ["sentence", "condition", "both"])
def test_a_cache_saved_before_caches_recorded_their_tokenizer_is_refused_by_name(model, bert, tmp_path, old):
    caches = {
        "sentence": model.encode_sentences(SENTENCES, bert),
        "condition": model.encode_conditions(CONDITIONS, bert),
    }
    for kind in ("sentence", "condition") if old == "both" else (old,):
        caches[kind] = load_cache(save_cache(_without_tokenizer(caches[kind]), tmp_path / f"{kind}.safetensors"))
    first = "sentence" if old == "both" else old
    with pytest.raises(
        ValueError, match=f"the {first} cache records no tokenizer_fingerprint .* rebuild it with `encode_{first}s`"
    ):
        model.embed(caches["sentence"], caches["condition"])


@pytest.fixture(scope="module")
def fresh(model, bert, roberta, tmp_path_factory):
    """The export of `model`, and what a process without pairzoo made of it: sentence cache files built there with
    the export's tokenizer (`own`) and with tiny-roberta's, and its sentence-transformers results."""
    root = tmp_path_factory.mktemp("csr-cache-tokenizer")
    folder = export_model(model, bert, root / "export")
    roberta.save_pretrained(root / "roberta")
    args = [str(folder), str(root / "roberta"), str(root), SENTENCES, CONDITIONS[0]]
    proc = run_without_pairzoo(_SCRIPT, [json.dumps(args)])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, (proc.returncode, proc.stdout[:3000], proc.stderr[-4000:])
    return root, json.loads(lines[0][len("PAIRZOO_RESULT ") :])


def test_a_cache_built_by_the_export_in_another_process_meets_this_ones(model, bert, fresh):
    root, _ = fresh
    conditions = model.encode_conditions(CONDITIONS, bert)
    own = load_cache(root / "own.safetensors")
    assert own.metadata["tokenizer_fingerprint"] == tokenizer_fingerprint(bert)
    expected = model.embed(model.encode_sentences(SENTENCES, bert), conditions)
    torch.testing.assert_close(model.embed(own, conditions), expected, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="sentence cache by RobertaTokenizer .*condition cache by BertTokenizer"):
        model.embed(load_cache(root / "roberta.safetensors"), conditions)


def test_sentence_transformers_token_embeddings_are_refused_by_output_value(fresh):
    _, results = fresh
    error = results["token_embeddings"]
    assert error["error"].startswith(
        "OutputValueError: `output_value='token_embeddings'` is not an output of this model: it gives one "
        "conditioned `sentence_embedding` per input, no per-token states; use output_value='sentence_embedding'"
    )
    assert error["kinds"] == ["ValueError", "KeyError"]  # a missing output is still a KeyError to callers


def test_sentence_transformers_output_value_none_gives_each_inputs_features(fresh):
    _, results = fresh
    default, every = results["default"]["value"], results["all"]["value"]
    assert len(every) == len(SENTENCES)
    assert {"input_ids", "attention_mask", "input_ids_3", "attention_mask_3", "sentence_embedding"} == set(every[0])
    embeddings = torch.tensor([features["sentence_embedding"] for features in every])
    torch.testing.assert_close(embeddings, torch.tensor(default), atol=1e-6, rtol=0)
