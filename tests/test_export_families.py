"""Every family's export runs in plain transformers where `import pairzoo` fails.

One tiny (tiny-bert) export per family, all loaded in a single fresh process: each Auto class of its `auto_map`, then
the pipeline its card names scores two inputs; the scores equal pairzoo's own pipeline on the same model. A
cross-encoder trained on a pair task also loads in sentence-transformers' `CrossEncoder`. Length-sorted batching
returns the outputs in the input order, equal to unbatched scoring.
"""

import json
import re

import pytest
import torch
from transformers import pipeline, set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.hub_cards import export_model, score_exports_in_fresh_process
from pairzoo.registry import get_model_spec

ATOL, RTOL = 1e-6, 1e-5
CONDITIONAL = [
    {"sentence1": "Two women are walking in a park.", "sentence2": "A man runs on a beach.", "condition": "People."},
    {"sentence1": "A cat sleeps.", "sentence2": "A dog sleeps on the warm sofa.", "condition": "The animal."},
]
PAIRS = [
    {"text": "Two women are walking in a park.", "text_pair": "A man runs on a beach."},
    {"text": "A cat sleeps.", "text_pair": "A dog sleeps on the warm sofa."},
]
NA_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
# name -> (config overrides of a tiny model, the task kind it is exported for; None: its registry task)
FAMILIES = {
    "cross-encoder": ({"label_min": 0.0, "label_max": 5.0}, "pair-regression"),  # an STS-B-like pair regressor
    "seaver": ({}, None),
    "csr": ({}, None),
    "comateformer": ({"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]}, None),
    "siamese-matcher": ({"hidden_size": 64, "max_sequence_length": 32, "sfa_reductions": [2, 2]}, None),
    "neighbor-attention": (
        {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "id2label": NA_LABELS},
        "pair-classification",
    ),
}


def _examples(pipeline_task: str) -> list[dict]:
    return CONDITIONAL if pipeline_task == "conditional-similarity" else PAIRS


def _assert_same_outputs(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.keys() == e.keys() and g.get("label") == e.get("label")
        torch.testing.assert_close(torch.tensor(g["score"]), torch.tensor(e["score"]), atol=ATOL, rtol=RTOL)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


@pytest.fixture(scope="module")
def exports(tokenizer, tmp_path_factory):
    """name -> (model, export folder, task) for every family."""
    root = tmp_path_factory.mktemp("families")
    built = {}
    for name, (overrides, task) in FAMILIES.items():
        set_seed(0)
        model = create_model(name, backbone="tiny-bert", **overrides).eval()
        built[name] = (model, export_model(model, tokenizer, root / name, task=task), task)
    return built


def test_every_family_loads_and_scores_without_pairzoo_as_its_card_says(exports, tokenizer):
    assert set(exports) == {"cross-encoder", "seaver", "csr", "comateformer", "siamese-matcher", "neighbor-attention"}
    jobs, expected = [], {}
    for name, (model, folder, task) in exports.items():
        spec = get_model_spec(name)
        auto_class, pipeline_task = spec.entry_points(task)
        card = (folder / "README.md").read_text()
        assert f"{auto_class}.from_pretrained(" in card and f'pipeline("{pipeline_task}"' in card, name
        config = json.loads((folder / "config.json").read_text())
        assert auto_class in config["auto_map"] and pipeline_task in config["custom_pipelines"], name
        examples = _examples(pipeline_task)
        jobs.append({"folder": folder, "examples": examples, "pipeline_task": pipeline_task, "auto_classes": []})
        jobs[-1]["auto_classes"] = sorted(set(config["auto_map"]) - {"AutoConfig"})
        expected[name] = pipeline(pipeline_task, model=model, tokenizer=tokenizer)(examples)
    results = score_exports_in_fresh_process(jobs)  # one process for all families
    for (name, (model, _, _)), job, result in zip(exports.items(), jobs, results):
        spec = get_model_spec(name)
        assert set(result["auto_classes"]) == set(job["auto_classes"]), name
        for auto_class, loaded in result["auto_classes"].items():
            assert not loaded.startswith("pairzoo") and loaded.endswith(spec.auto_classes[auto_class].__name__)
        assert result["class"].endswith(type(model).__name__) and not result["class"].startswith("pairzoo")
        assert not result["pipeline"].startswith("pairzoo"), result["pipeline"]
        _assert_same_outputs(result["outputs"], expected[name])
    by_name = dict(zip(exports, results))
    assert set(by_name["comateformer"]["auto_classes"]) == {"AutoModel", "AutoModelForSequenceClassification"}
    assert by_name["comateformer"]["auto_classes"]["AutoModel"].endswith(".ComateformerModel")
    assert by_name["neighbor-attention"]["outputs"][0]["label"] in NA_LABELS.values()
    for name in ("cross-encoder", "comateformer", "siamese-matcher"):  # regressors: a score, no label
        assert set(by_name[name]["outputs"][0]) == {"score"}, name


def test_a_pair_task_cross_encoder_scores_on_its_label_scale_without_a_condition(exports, tokenizer):
    model, folder, _ = exports["cross-encoder"]
    scorer = pipeline("pair-similarity", model=model, tokenizer=tokenizer)
    from pairzoo import encode_conditional_inputs

    with torch.no_grad():
        outputs = model(**encode_conditional_inputs(tokenizer, PAIRS[0]["text"], PAIRS[0]["text_pair"]))
    score = scorer(PAIRS[0])["score"]
    torch.testing.assert_close(torch.tensor(score), outputs.scores[0], atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(torch.tensor(score), 5.0 * outputs.logits[0, 0], atol=ATOL, rtol=RTOL)  # 0-5 scale
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["model_input_names"] == ["input_ids", "attention_mask"]


def test_a_pair_task_cross_encoder_export_loads_in_sentence_transformers(exports, tokenizer):
    """`CrossEncoder(folder, trust_remote_code=True).predict` gives the pipeline's label-scale score (every family:
    tests/test_sentence_transformers.py)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, folder, _ = exports["cross-encoder"]
    cross_encoder = sentence_transformers.CrossEncoder(str(folder), trust_remote_code=True, device="cpu")
    pairs = [(p["text"], p["text_pair"]) for p in PAIRS] + [("A man plays a guitar on a stage at night.", "Music.")]
    predicted = torch.as_tensor(cross_encoder.predict(pairs, batch_size=2))
    scores = pipeline("pair-similarity", model=model, tokenizer=tokenizer)(
        [{"text": a, "text_pair": b} for a, b in pairs]
    )
    expected = torch.tensor([s["score"] for s in scores])
    torch.testing.assert_close(predicted.float(), expected, atol=ATOL, rtol=RTOL)


ROWS = [
    ("A man.", "A dog."),
    ("Two women in red jackets are walking their dogs through a park early in the morning.", "People walk."),
    ("A cat sleeps.", "A cat sleeps on the sofa next to a large window in the living room all afternoon."),
    ("Hi.", "Yes."),
    ("A child rides a horse on a beach at sunset while the waves roll in.", "A kid is on a horse."),
    ("The stock market fell sharply today.", "Shares dropped."),
    ("Rain.", "It is raining heavily over the whole city and the streets are flooded."),
]


@pytest.mark.parametrize(
    "name", ["cross-encoder", "seaver", "csr", "comateformer", "siamese-matcher", "neighbor-attention"]
)
def test_sorted_batching_keeps_the_input_order_and_equals_unbatched_scoring(name, exports, tokenizer):
    model = exports[name][0]
    pipeline_task = get_model_spec(name).entry_points(exports[name][2])[1]
    if pipeline_task == "conditional-similarity":
        inputs = [{"sentence1": a, "sentence2": b, "condition": "The topic."} for a, b in ROWS]
    else:
        inputs = [{"text": a, "text_pair": b} for a, b in ROWS]
    scorer = pipeline(pipeline_task, model=model, tokenizer=tokenizer)
    widths = []
    forward = scorer._forward
    scorer._forward = lambda batch: widths.append(batch["input_ids"].shape[1]) or forward(batch)
    batched = scorer(inputs, batch_size=3)
    assert len(widths) == 3 and widths == sorted(widths, reverse=True), widths  # one forward per batch, longest first
    one_by_one = [scorer(example) for example in inputs]
    _assert_same_outputs(batched, one_by_one)
    assert len({round(o["score"], 6) for o in one_by_one}) > 1, "scores must differ for the order to be checked"
    at_construction = pipeline(pipeline_task, model=model, tokenizer=tokenizer, batch_size=4)(inputs)
    _assert_same_outputs(at_construction, one_by_one)


def test_export_entry_points_of_every_family():
    """The one place the card, `auto_map` and `custom_pipelines` read: Auto class and pipeline per trained task."""
    assert get_model_spec("cross-encoder").entry_points() == ("AutoModel", "conditional-similarity")
    assert get_model_spec("cross-encoder").entry_points("pair-regression") == (
        "AutoModelForSequenceClassification",
        "pair-similarity",
    )
    for name in ("seaver", "csr"):
        assert get_model_spec(name).entry_points() == ("AutoModel", "conditional-similarity")
        assert get_model_spec(name).pipeline_tasks == ("conditional-similarity",)
    for name in ("comateformer", "siamese-matcher", "neighbor-attention"):
        assert get_model_spec(name).entry_points() == ("AutoModelForSequenceClassification", "pair-similarity")
    assert get_model_spec("comateformer").auto_classes["AutoModel"].__name__ == "ComateformerModel"
    with pytest.raises(ValueError, match=re.escape("`task` 'conditional-similarity' is not one comateformer")):
        get_model_spec("comateformer").entry_points("conditional-similarity")
