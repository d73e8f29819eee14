"""Edges of exports in sentence-transformers (>= 6.2), loaded in a process where `import pairzoo` fails.

What a sentence-transformers user changes around `predict`/`encode` keeps pairzoo's pipeline numbers or is one clear
error: the truncation length from `max_length=`, `processing_kwargs` (per call) and the module's `query_length`
equals the pipeline's `max_length` on a long first sentence, and any other processing setting (which pairzoo's own
encoding would ignore) is a ValueError naming it; `batch_size` 1 and 32 over inputs of very different lengths give
the same scores; float16 weights (`model_kwargs`) give the float16 pipeline's scores; a prompt named in `prompts=` is
the condition; `model.save(folder)` and a reload keep the scores, a classifier's label count included (the saved
module settings carry `config_kwargs.num_labels`); loading without `trust_remote_code`, or a pair scorer as a
`SentenceTransformer`, is an error, not numbers.
"""

import json
from pathlib import Path

import pytest
import torch
from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
from test_sentence_transformers import build_exports
from transformers import pipeline

from pairzoo.hub_cards import run_without_pairzoo
from pairzoo.hub_cards.sentence_transformers_modules import calling_loss

ATOL = 1e-5
LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
CONDITION = "The number of people."
LONG = "Two women are walking in a park while " + "the sun shines brightly over the green hills " * 6
S1 = [LONG, "A cat.", "Music plays loudly."]
S2 = ["Hi there.", "A dog sleeps on the warm sofa " * 4, "A man plays a guitar on a stage at night."]
SHORT = 16  # tokens: truncates the long first sentence
# case -> (family, backbone, config overrides, task kind of the export)
CASES = {
    "regressor": ("cross-encoder", "tiny-bert", {}, "conditional-similarity"),
    "classifier": ("cross-encoder", "tiny-roberta", {"id2label": LABELS}, "pair-classification"),
    "csr": ("csr", "tiny-bert", {"architecture": "bi"}, None),
}

# The fresh process's `record(name, fn)`: `fn()`'s value (a list where it has `tolist`) or its error, under `name`.
RECORD = r"""
def record(name, fn):
    try:
        value = fn()
        results[name] = {"value": value.tolist() if hasattr(value, "tolist") else value}
    except Exception as err:
        results[name] = {"error": f"{type(err).__name__}: {err}"}
"""

_SCRIPT = (
    RECORD
    + r"""
import json, sys
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer

folders, saved = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = {}

S1, S2, C, SHORT = json.loads(sys.argv[3])
rows = [[a, b, C] for a, b in zip(S1, S2)]
pairs = [[a, b] for a, b in zip(S1, S2)]
ce = CrossEncoder(folders["regressor"], trust_remote_code=True, device="cpu")
record("default", lambda: ce.predict(rows))
record("batch 1", lambda: ce.predict(rows, batch_size=1))
record("batch 32", lambda: ce.predict(rows, batch_size=32))
record("max_length", lambda: ce.predict(rows, max_length=SHORT))
record("text max_length", lambda: ce.predict(rows, processing_kwargs={"text": {"max_length": SHORT}}))
record("common max_length", lambda: ce.predict(rows, processing_kwargs={"common": {"max_length": SHORT}}))
record("text over call", lambda: ce.predict(rows, max_length=64, processing_kwargs={"text": {"max_length": SHORT}}))
record("truncation", lambda: ce.predict(rows, processing_kwargs={"text": {"truncation": "only_second"}}))
record("image", lambda: ce.predict(rows, processing_kwargs={"image": {"size": 8}}))
record("too long", lambda: ce.predict(rows, processing_kwargs={"text": {"max_length": 10_000}}))
record("prompt name", lambda: CrossEncoder(
    folders["regressor"], trust_remote_code=True, device="cpu", prompts={"people": C}
).predict(pairs, prompt_name="people"))
record("float16", lambda: CrossEncoder(
    folders["regressor"], trust_remote_code=True, device="cpu", model_kwargs={"dtype": torch.float16}
).predict(rows))
ce.save(saved["regressor"])
record("saved", lambda: CrossEncoder(saved["regressor"], trust_remote_code=True, device="cpu").predict(rows))
record("no remote code", lambda: CrossEncoder(folders["regressor"], device="cpu"))
record("as sentence transformer", lambda: SentenceTransformer(
    folders["regressor"], trust_remote_code=True, device="cpu"
).encode([rows[0]]))

classifier = CrossEncoder(folders["classifier"], trust_remote_code=True, device="cpu")
record("classifier", lambda: classifier.predict(pairs))
classifier.save(saved["classifier"])
record("classifier saved", lambda: CrossEncoder(
    saved["classifier"], trust_remote_code=True, device="cpu"
).predict(pairs))

csr = SentenceTransformer(folders["csr"], trust_remote_code=True, device="cpu")
def similarity(model, **kwargs):
    first, second = (model.encode(texts, prompt=C, **kwargs) for texts in (S1, S2))
    return model.similarity_pairwise(first, second)
record("csr", lambda: similarity(csr))
record("csr normalized", lambda: similarity(csr, normalize_embeddings=True))
record("csr text max_length", lambda: similarity(csr, processing_kwargs={"text": {"max_length": SHORT}}))
def query_length():
    csr[0].query_length = SHORT
    first, second = (csr.encode_query(texts, prompt=C) for texts in (S1, S2))
    csr[0].query_length = None
    return csr.similarity_pairwise(first, second)
record("csr query_length", query_length)
csr.save(saved["csr"])
record("csr saved", lambda: similarity(SentenceTransformer(saved["csr"], trust_remote_code=True, device="cpu")))
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """case -> (model, tokenizer, export folder), the folders the fresh process saved to, and its results."""
    root = tmp_path_factory.mktemp("st-edges")
    built = build_exports(CASES, root)
    folders = {case: str(folder) for case, (_, _, folder) in built.items()}
    saved = {case: str(root / f"saved-{case}") for case in CASES}
    proc = run_without_pairzoo(
        _SCRIPT, [json.dumps(folders), json.dumps(saved), json.dumps([S1, S2, CONDITION, SHORT])]
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-4000:]
    return built, saved, json.loads(lines[0][len("PAIRZOO_RESULT ") :])


def _value(results: dict, name: str) -> list:
    assert "value" in results[name], results[name].get("error")
    return results[name]["value"]


def _error(results: dict, name: str) -> str:
    assert "error" in results[name], results[name]
    return results[name]["error"]


def _pipeline_scores(built: dict, case: str, **kwargs) -> "list[float]":
    """The conditional-similarity pipeline's scores of (S1, S2) under CONDITION (`kwargs`: call arguments)."""
    model, tokenizer, _ = built[case]
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    examples = [{"sentence1": a, "sentence2": b, "condition": CONDITION} for a, b in zip(S1, S2)]
    return [output["score"] for output in scorer(examples, **kwargs)]


def _close(actual: "list[float]", expected: "list[float]", atol: float = ATOL) -> None:
    torch.testing.assert_close(torch.tensor(actual), torch.tensor(expected), atol=atol, rtol=0)


def test_every_way_to_set_the_length_truncates_as_the_pipeline_does(built):
    exports, _, results = built
    full, short = _pipeline_scores(exports, "regressor"), _pipeline_scores(exports, "regressor", max_length=SHORT)
    assert max(abs(a - b) for a, b in zip(full, short)) > ATOL  # the long first sentence is cut at SHORT tokens
    _close(_value(results, "default"), full)
    for name in ("max_length", "text max_length", "common max_length", "text over call"):
        _close(_value(results, name), short)


def test_csr_truncates_at_a_processing_length_or_the_query_length_as_the_pipeline_does(built):
    exports, _, results = built
    model = exports["csr"][0]
    span, low = model.config.label_max - model.config.label_min, model.config.label_min
    short = _pipeline_scores(exports, "csr", max_length=SHORT)
    assert max(abs(a - b) for a, b in zip(short, _pipeline_scores(exports, "csr"))) > ATOL
    for name in ("csr text max_length", "csr query_length"):
        _close([low + span * similarity for similarity in _value(results, name)], short)


def test_processing_settings_pairzoos_encoding_does_not_take_are_refused(built):
    _, _, results = built
    truncation, image, too_long = (_error(results, name) for name in ("truncation", "image", "too long"))
    assert truncation.startswith("ValueError: `processing_kwargs` sets text.truncation:")
    assert image.startswith("ValueError: `processing_kwargs` sets image:")
    assert too_long.startswith("ValueError: `processing_kwargs['text']['max_length']` is 10000, above the backbone")


def test_batch_size_does_not_change_the_scores_of_inputs_of_very_different_lengths(built):
    exports, _, results = built
    expected = _pipeline_scores(exports, "regressor", batch_size=1)
    _close(_value(results, "batch 1"), expected)
    _close(_value(results, "batch 32"), expected)


def test_a_prompt_named_in_prompts_is_the_condition(built):
    _, _, results = built
    _close(_value(results, "prompt name"), _value(results, "default"))


def test_float16_weights_give_the_float16_pipelines_scores(built):
    exports, _, results = built
    _, _, folder = exports["regressor"]
    scorer = pipeline("conditional-similarity", model=str(folder), trust_remote_code=True, dtype=torch.float16)
    examples = [{"sentence1": a, "sentence2": b, "condition": CONDITION} for a, b in zip(S1, S2)]
    _close(_value(results, "float16"), [output["score"] for output in scorer(examples)])


def test_a_saved_and_reloaded_model_keeps_its_scores_and_its_labels(built):
    _, saved, results = built
    _close(_value(results, "saved"), _value(results, "default"))
    probabilities = _value(results, "classifier saved")
    assert all(len(row) == len(LABELS) for row in probabilities)
    _close(probabilities, _value(results, "classifier"))
    module_config = json.loads((Path(saved["classifier"]) / "sentence_bert_config.json").read_text())
    assert module_config["config_kwargs"] == {"num_labels": len(LABELS)}
    _close(_value(results, "csr saved"), _value(results, "csr"))


def test_csr_similarity_of_normalized_embeddings_is_the_pipelines_score(built):
    exports, _, results = built
    model = exports["csr"][0]
    span, low = model.config.label_max - model.config.label_min, model.config.label_min
    _close(
        [low + span * similarity for similarity in _value(results, "csr normalized")], _pipeline_scores(exports, "csr")
    )


def test_loading_without_remote_code_or_a_pair_scorer_as_an_embedder_is_an_error(built):
    _, _, results = built
    no_remote = _error(results, "no remote code")
    assert no_remote.startswith("ValueError") and "trust_remote_code=True" in no_remote
    assert _error(results, "as sentence transformer").startswith("ValueError")


def _loss_class(module: str, name: str, base: type = torch.nn.Module) -> type:
    """A loss class of `name` in `module` whose forward returns what `calling_loss` finds from inside it."""

    def forward(self):
        return calling_loss()

    return type(name, (base,), {"__module__": module, "forward": forward})


def test_calling_loss_finds_sentence_transformers_losses_wherever_they_live_and_their_subclasses():
    """The losses call the model without naming themselves: a loss of sentence-transformers' package (any module of
    it, as a later version may move them) or a user's subclass of one is found; other modules and callers are not."""
    moved = _loss_class("sentence_transformers.losses.moved", "MovedLoss")()
    assert moved() is moved
    subclass = _loss_class(__name__, "MyLoss", BinaryCrossEntropyLoss)
    mine = subclass.__new__(subclass)  # its own __init__ wants a model; the class is what counts
    torch.nn.Module.__init__(mine)
    assert mine() is mine
    for other in (_loss_class("sentence_transformers.models", "Pooling"), _loss_class("mylosses", "MyLoss")):
        assert other()() is None
    assert calling_loss() is None
