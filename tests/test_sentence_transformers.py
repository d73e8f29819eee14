"""Every family's export in sentence-transformers, in a process where `import pairzoo` fails.

Pair scorers load as `CrossEncoder(folder, trust_remote_code=True)`: `predict` and `rank` equal pairzoo's pipeline
(the label scale of a regressor; class probabilities in `id2label` order), the token ids are the pipeline's (RoBERTa's
pair template included), and a condition is the last text of an input or `prompt=`. CSR loads as
`SentenceTransformer(folder, trust_remote_code=True)`: `encode(sentences, prompt=condition)` gives the embeddings of
pairzoo's forward (and, for the tri-encoder, of its cache), and `label_min + span * similarity` is the pipeline's
score. All exports are loaded in one fresh process.
"""

import json

import pytest
import torch
from transformers import pipeline, set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.hub_cards import export_model, run_without_pairzoo
from pairzoo.hub_cards.sentence_transformers_files import sentence_transformers_files
from pairzoo.pipelines import encode_conditional_inputs
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs
from pairzoo.registry import get_model_spec

ATOL = 1e-5
LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
S1 = ["Two women are walking in a park.", "A cat sleeps.", "A man plays a guitar on a stage at night for a crowd."]
S2 = ["A man runs on a beach.", "A dog sleeps on the warm sofa.", "Music."]
CONDITIONS = ["The number of people.", "The animal.", "The activity."]
CONDITION = "The number of people."
# case -> (family, backbone, config overrides, task kind it is exported for; None: the family's registry task)
CASES = {
    "cross-encoder-roberta": ("cross-encoder", "tiny-roberta", {}, "conditional-similarity"),
    "cross-encoder-3-class": ("cross-encoder", "tiny-bert", {"id2label": LABELS}, "conditional-classification"),
    "cross-encoder-roberta-pairs": ("cross-encoder", "tiny-roberta", {"id2label": LABELS}, "pair-classification"),
    "seaver": ("seaver", "tiny-bert", {}, None),
    "comateformer": (
        "comateformer",
        "tiny-bert",
        {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]},
        None,
    ),
    "siamese-matcher": ("siamese-matcher", "tiny-bert", {"hidden_size": 64, "max_sequence_length": 32}, None),
    "neighbor-attention": (
        "neighbor-attention",
        "tiny-bert",
        {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "id2label": LABELS},
        "pair-classification",
    ),
    "csr-bi": ("csr", "tiny-bert", {"architecture": "bi"}, None),
    "csr-tri": ("csr", "tiny-bert", {"tri_head": "hadamard"}, None),
}
EMBEDDERS = ("csr-bi", "csr-tri")

_SCRIPT = r"""
import json, sys
from sentence_transformers import CrossEncoder, SentenceTransformer

def plain(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value

def call(model, method, args, kwargs):
    try:
        if method == "similarity_of_pairs":  # model.similarity of each (a, b) row, both encoded under `prompt`
            first, second = (model.encode(texts, **kwargs) for texts in args)
            return {"value": model.similarity(first, second).diagonal().tolist()}
        return {"value": plain(getattr(model, method)(*args, **kwargs))}
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}

results = {}
for case, job in json.loads(sys.argv[1]).items():
    try:
        loader = SentenceTransformer if job["kind"] == "SentenceTransformer" else CrossEncoder
        model = loader(job["folder"], trust_remote_code=True, device="cpu")
    except Exception as err:
        results[case] = {"load_error": f"{type(err).__name__}: {err}"}
        continue
    module = type(model[0])
    results[case] = {
        "module": module.__module__ + "." + module.__name__,
        "calls": [call(model, method, args, kwargs) for method, args, kwargs in job["calls"]],
    }
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""


def _pipeline_task(case: str) -> str:
    """The pipeline that scores the export of `case` (its card's)."""
    family, _, _, task = CASES[case]
    return get_model_spec(family).entry_points(task)[1]


def _pairs(case: str) -> "list[dict]":
    """The pipeline inputs of a case, one per row of S1/S2/CONDITIONS."""
    task = CASES[case][3]
    if _pipeline_task(case) == "pair-similarity":
        return [{"text": a, "text_pair": b} for a, b in zip(S1, S2)]
    if task == "conditional-classification":
        return [{"sentence1": a, "condition": c} for a, c in zip(S1, CONDITIONS)]
    return [{"sentence1": a, "sentence2": b, "condition": c} for a, b, c in zip(S1, S2, CONDITIONS)]


def _calls(case: str) -> list:
    """What the fresh process calls on the loaded model, `[method, args, kwargs]` each."""
    if case in EMBEDDERS:
        return [
            ["encode", [S1], {"prompt": CONDITION}],
            ["similarity_of_pairs", [S1, S2], {"prompt": CONDITION}],
            ["encode", [[[s, c] for s, c in zip(S1, CONDITIONS)]], {}],
            ["encode", [S1], {}],  # no condition: an error
        ]
    rows = [list(example.values()) for example in _pairs(case)]
    calls = [["predict", [rows], {"batch_size": 2}], ["preprocess", [rows[:1]], {}]]
    if case == "cross-encoder-roberta":
        calls += [
            ["predict", [[[a, b] for a, b in zip(S1, S2)]], {"prompt": CONDITION}],
            ["rank", [S1[0], S2], {"prompt": CONDITION}],
            ["predict", [[[a, b] for a, b in zip(S1, S2)]], {}],  # no condition: an error
            ["predict", [[[S1[0], "  ", CONDITION]]], {}],  # an empty text: the pipeline's error
            ["predict", [[[S1[0], S2[0], CONDITION]]], {"max_length": 10_000}],  # beyond the positions: an error
        ]
    if case == "cross-encoder-roberta-pairs":
        calls += [["predict", [rows], {"prompt": CONDITION}], ["rank", [S1[0], S2], {}]]  # both errors
    return calls


def build_exports(cases: dict, root) -> dict:
    """case -> (model, tokenizer, export folder under `root`) of each `(family, backbone, overrides, task)` case,
    each model built at seed 0 in evaluation mode."""
    built = {}
    for case, (family, backbone, overrides, task) in cases.items():
        set_seed(0)
        model = create_model(family, backbone=backbone, **overrides).eval()
        tokenizer = load_tokenizer(backbone)
        built[case] = (model, tokenizer, export_model(model, tokenizer, root / case, task=task))
    return built


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """case -> (model, tokenizer, export folder), and the fresh process's results for every case."""
    built = build_exports(CASES, tmp_path_factory.mktemp("st"))
    jobs = {
        case: {
            "folder": str(folder),
            "kind": "SentenceTransformer" if case in EMBEDDERS else "CrossEncoder",
            "calls": _calls(case),
        }
        for case, (_, _, folder) in built.items()
    }
    jobs["csr-as-cross-encoder"] = {"folder": str(built["csr-bi"][2]), "kind": "CrossEncoder", "calls": []}
    proc = run_without_pairzoo(_SCRIPT, [json.dumps(jobs)])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-4000:]
    return built, json.loads(lines[0][len("PAIRZOO_RESULT ") :])


def _value(result: dict) -> list:
    assert "value" in result, result.get("error")
    return result["value"]


def _expected(case: str, built: dict) -> "list[dict]":
    model, tokenizer, _ = built[case]
    return pipeline(_pipeline_task(case), model=model, tokenizer=tokenizer)(_pairs(case))


def _assert_matches_pipeline(predicted: list, expected: "list[dict]", id2label: dict) -> None:
    assert len(predicted) == len(expected)
    for row, reference in zip(predicted, expected):
        if "label" not in reference:  # a regressor: the score on its label scale
            assert abs(row - reference["score"]) <= ATOL, (row, reference)
            continue
        probabilities = torch.tensor(row)
        best = int(probabilities.argmax())
        assert id2label[best] == reference["label"] and len(row) == len(id2label)
        assert abs(float(probabilities[best]) - reference["score"]) <= ATOL
        assert abs(float(probabilities.sum()) - 1.0) <= ATOL


@pytest.mark.parametrize("case", [case for case in CASES if case not in EMBEDDERS])
def test_every_pair_scorer_loads_as_a_cross_encoder_and_predicts_the_pipelines_scores(built, case):
    exports, results = built
    model = exports[case][0]
    assert results[case]["module"].endswith("sentence_transformers_modules.PairzooScorer")
    assert not results[case]["module"].startswith("pairzoo")
    predicted = _value(results[case]["calls"][0])
    _assert_matches_pipeline(predicted, _expected(case, exports), model.config.id2label)


@pytest.mark.parametrize("case", [case for case in CASES if case not in EMBEDDERS])
def test_the_cross_encoder_reads_the_pipelines_token_ids(built, case):
    exports, results = built
    model, tokenizer, _ = exports[case]
    expected = pipeline(_pipeline_task(case), model=model, tokenizer=tokenizer).preprocess(_pairs(case)[0])
    features = _value(results[case]["calls"][1])
    assert set(features) == set(expected), case  # the same inputs, token types only where the pipeline has them
    for key, tensor in expected.items():
        assert features[key] == tensor.tolist(), (case, key)


def test_token_types_reach_only_models_that_read_the_tokenizers_pair_encoding(built):
    _, results = built
    assert "token_type_ids" in _value(results["comateformer"]["calls"][1])  # input_format "pair": BERT's segments
    for case in ("cross-encoder-3-class", "seaver"):  # input_format "cross": `[CLS] s1 SEP s2 SEP c SEP`, no types
        assert set(_value(results[case]["calls"][1])) == {"input_ids", "attention_mask"}, case


def test_roberta_inputs_are_the_tokenizers_own_pair_template(built):
    exports, results = built
    tokenizer = exports["cross-encoder-roberta-pairs"][1]
    features = _value(results["cross-encoder-roberta-pairs"]["calls"][1])
    assert features["input_ids"] == encode_conditional_inputs(tokenizer, S1[0], S2[0])["input_ids"].tolist()
    assert features["input_ids"][0] == tokenizer(S1[0], S2[0])["input_ids"]  # <s> a </s></s> b </s>
    conditional = _value(results["cross-encoder-roberta"]["calls"][1])
    assert (
        conditional["input_ids"]
        == encode_conditional_inputs(tokenizer, S1[0], S2[0], CONDITIONS[0])["input_ids"].tolist()
    )


def test_a_condition_is_the_last_text_of_each_input_or_the_prompt_for_all(built):
    exports, results = built
    model, tokenizer, _ = exports["cross-encoder-roberta"]
    calls = results["cross-encoder-roberta"]["calls"]
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    shared = scorer([{"sentence1": a, "sentence2": b, "condition": CONDITION} for a, b in zip(S1, S2)])
    _assert_matches_pipeline(_value(calls[2]), shared, model.config.id2label)
    ranked = _value(calls[3])
    scores = scorer([{"sentence1": S1[0], "sentence2": b, "condition": CONDITION} for b in S2])
    assert [r["corpus_id"] for r in ranked] == sorted(range(len(S2)), key=lambda i: -scores[i]["score"])
    for r in ranked:
        assert abs(r["score"] - scores[r["corpus_id"]]["score"]) <= ATOL
    assert "must be a tuple of 3 texts (sentence1, sentence2, condition)" in calls[4]["error"]
    assert "`prompt=`" in calls[4]["error"] and calls[4]["error"].startswith("ValueError")
    assert calls[5]["error"].startswith("ValueError") and "`sentence2`[0] is empty" in calls[5]["error"]
    assert (
        calls[6]["error"].startswith("ValueError")
        and "`max_length` is 10000, above the backbone's limit" in calls[6]["error"]
    )


def test_a_conditional_classifier_takes_sentence_and_condition_pairs_and_gives_probabilities_in_label_order(built):
    exports, results = built
    files = sentence_transformers_files(exports["cross-encoder-3-class"][0], "conditional-classification")
    assert json.loads(files["sentence_bert_config.json"])["input_fields"] == ["sentence1", "condition"]
    predicted = _value(results["cross-encoder-3-class"]["calls"][0])
    assert all(len(row) == len(LABELS) for row in predicted)


def test_a_three_class_sequence_classifier_keeps_its_labels_in_sentence_transformers(built):
    """sentence-transformers resets `num_labels` to 1 for a sequence classifier whose architecture name does not end
    in `ForSequenceClassification`, unless `config_kwargs` names it: the export does."""
    exports, results = built
    model = exports["cross-encoder-roberta-pairs"][0]
    assert not model.config.architectures or not model.config.architectures[0].endswith("ForSequenceClassification")
    files = sentence_transformers_files(model, "pair-classification")
    module_config = json.loads(files["sentence_bert_config.json"])
    assert module_config["transformer_task"] == "sequence-classification"
    assert module_config["config_kwargs"] == {"num_labels": 3}
    assert all(len(row) == 3 for row in _value(results["cross-encoder-roberta-pairs"]["calls"][0]))


def test_a_model_trained_without_a_condition_refuses_one_and_a_classifier_cannot_rank(built):
    _, results = built
    with_prompt, rank = results["cross-encoder-roberta-pairs"]["calls"][2:4]
    assert with_prompt["error"].startswith("ValueError") and "reads no condition" in with_prompt["error"]
    assert rank["error"].startswith("ValueError") and "num_labels=1" in rank["error"]


@pytest.mark.parametrize("case", EMBEDDERS)
def test_csr_loads_as_a_sentence_transformer_whose_similarity_maps_onto_the_pipelines_score(built, case):
    exports, results = built
    model, tokenizer, _ = exports[case]
    calls = results[case]["calls"]
    assert results[case]["module"].endswith("sentence_transformers_modules.PairzooEmbedder")
    expected = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)(
        [{"sentence1": a, "sentence2": b, "condition": CONDITION} for a, b in zip(S1, S2)]
    )
    span = model.config.label_max - model.config.label_min
    for similarity, reference in zip(_value(calls[1]), expected):
        assert abs(model.config.label_min + span * similarity - reference["score"]) <= ATOL


def test_csr_bi_embeddings_are_pairzoos_conditioned_embeddings(built):
    exports, results = built
    model, tokenizer, _ = exports["csr-bi"]
    with torch.no_grad():
        shared = model(**encode_bi_inputs(tokenizer, S1, None, [CONDITION] * len(S1))).embeddings
        own = model(**encode_bi_inputs(tokenizer, S1, None, CONDITIONS)).embeddings
    calls = results["csr-bi"]["calls"]
    torch.testing.assert_close(torch.tensor(_value(calls[0])), shared, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.tensor(_value(calls[2])), own, atol=ATOL, rtol=0)  # (sentence, condition) rows


def test_csr_tri_embeddings_equal_pairzoos_cache(built):
    exports, results = built
    model, tokenizer, _ = exports["csr-tri"]
    with torch.no_grad():
        cached = model.embed(model.encode_sentences(S1, tokenizer), model.encode_conditions([CONDITION], tokenizer))
    torch.testing.assert_close(torch.tensor(_value(results["csr-tri"]["calls"][0])), cached[:, 0], atol=ATOL, rtol=0)


def test_csr_needs_a_condition_and_is_not_a_cross_encoder(built):
    exports, results = built
    error = results["csr-bi"]["calls"][3]["error"]
    assert error.startswith("ValueError") and "must be a tuple of 2 texts (sentence, condition)" in error
    # no sequence-classification head: CSR scores by comparing two embeddings
    assert "AutoModelForSequenceClassification" in results["csr-as-cross-encoder"]["load_error"]
    card = (exports["csr-bi"][2] / "README.md").read_text()
    assert "SentenceTransformer(" in card and "not as a `CrossEncoder`" in card and "prompt=" in card


def test_cards_show_the_sentence_transformers_call_of_their_family(built):
    exports, _ = built
    for case, (_, _, folder) in exports.items():
        card = (folder / "README.md").read_text()
        assert "### With sentence-transformers" in card, case
        loader = "SentenceTransformer(" if case in EMBEDDERS else "CrossEncoder("
        assert f"{loader}{json.dumps(str(folder))}, trust_remote_code=True)" in card, case  # the folder, until a push
    assert "prompt=" in (exports["cross-encoder-roberta"][2] / "README.md").read_text()
    assert "prompt=" not in (exports["comateformer"][2] / "README.md").read_text()
