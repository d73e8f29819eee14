"""Fine-tuning exports with sentence-transformers (>= 6.2) in a process where `import pairzoo` fails.

A regressor loaded as `CrossEncoder` trains with `MSELoss` on labels on its label scale (per-row conditions as
`(sentence1, (sentence2, condition))` pairs, or one condition as the trainer's `prompts=`) and moves toward them;
`BinaryCrossEntropyLoss`, `CrossEncoderTrainer`'s default for one label, would train `sigmoid(scores)` toward [0, 1]
labels while the pipeline reads the scores on the label scale, and is a ValueError before a weight changes. A
classifier trains with the default `CrossEntropyLoss`, which gets its class logits (its loss is the cross-entropy of
the model's logits). CSR loaded as `SentenceTransformer` trains with `CosineSimilarityLoss` under the condition given
as `prompts=` or as `[sentence, condition]` columns, the same training either way, and another condition trains
differently. Trainers start on plain text columns (sentence-transformers' data statistics encode each column alone).
A saved model reloads with the same scores or embeddings, and its folder still loads with transformers'
`AutoModelForSequenceClassification` and pairzoo's pipeline (remote code), which give its `predict` scores.
"""

import json
import math

import pytest
import torch
from test_sentence_transformers import ATOL, CASES, CONDITIONS, LABELS, S1, S2, _value, build_exports
from test_sentence_transformers_edges import RECORD, _close, _error

from pairzoo.hub_cards import run_without_pairzoo

REGRESSION_LABELS = [4.5, 1.0, 3.0]
CLASS_LABELS = [0, 1, 2]
OTHER_CONDITION = "The colour of the sky."
# case -> (family, backbone, config overrides, task kind of the export), from test_sentence_transformers' cases
EXPORTS = {
    "regressor": CASES["cross-encoder-roberta"],
    "classifier": CASES["cross-encoder-roberta-pairs"],
    "comateformer": (*CASES["comateformer"][:2], {**CASES["comateformer"][2], "regression_loss": "bce"}, None),
    "csr": CASES["csr-bi"],
}

_SCRIPT = (
    RECORD
    + r"""
import json, os, sys
import numpy as np
import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers import losses as st_losses
from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
from sentence_transformers.cross_encoder import losses
from sentence_transformers.cross_encoder.evaluation import CrossEncoderCorrelationEvaluator
from transformers import AutoModelForSequenceClassification, pipeline

folders, root = json.loads(sys.argv[1]), sys.argv[2]
S1, S2, CONDITIONS, REGRESSION_LABELS, CLASS_LABELS, OTHER = json.loads(sys.argv[3])
results = {}

def state(model):
    return {key: value.detach().clone() for key, value in model.state_dict().items()}

def changed(before, model):
    return sum(not torch.equal(before[key], value) for key, value in model.state_dict().items())

def train(trainer_class, args_class, model, data, name, loss=None, prompts=None, steps=8):
    args = args_class(
        output_dir=os.path.join(root, "trainer-" + name), max_steps=steps, per_device_train_batch_size=3,
        learning_rate=1e-2, report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True, seed=0,
        disable_tqdm=True, prompts=prompts,
    )
    before = state(model)
    trainer_class(model=model, args=args, train_dataset=data, loss=loss).train()
    return {"changed": changed(before, model), "parameters": len(before)}

def written(folder):
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

def cross_encoder(folder):
    return CrossEncoder(folder, trust_remote_code=True, device="cpu")

def reloaded(model, name, loader):
    saved = os.path.join(root, "saved-" + name)
    model.save_pretrained(saved)
    return saved, loader(saved, trust_remote_code=True, device="cpu")

nested = [[a, [b, c]] for a, b, c in zip(S1, S2, CONDITIONS)]
rest = [[b, c] for b, c in zip(S2, CONDITIONS)]
regression = Dataset.from_dict({"sentence1": S1, "rest": rest, "label": REGRESSION_LABELS})

# a conditional regressor: BinaryCrossEntropyLoss (the default) is refused, MSELoss on the label scale trains
model = cross_encoder(folders["regressor"])
before = state(model)
record("regressor bce", lambda: train(CrossEncoderTrainer, CrossEncoderTrainingArguments, model, regression, "bce"))
results["regressor bce unchanged"] = changed(before, model) == 0
results["regressor bce trainer files"] = written(os.path.join(root, "trainer-bce"))
results["regressor before"] = model.predict(nested).tolist()
record("regressor mse", lambda: train(
    CrossEncoderTrainer, CrossEncoderTrainingArguments, model, regression, "mse", loss=losses.MSELoss(model)
))
results["regressor after"] = model.predict(nested).tolist()
evaluator = CrossEncoderCorrelationEvaluator(nested, REGRESSION_LABELS, name="dev", write_csv=False)
record("regressor evaluator", lambda: evaluator(model))
saved, again = reloaded(model, "regressor", CrossEncoder)
results["regressor reloaded"] = again.predict(nested).tolist()
record("regressor auto class", lambda: type(
    AutoModelForSequenceClassification.from_pretrained(saved, trust_remote_code=True)
).__name__)
record("regressor pipeline", lambda: [output["score"] for output in pipeline(
    "conditional-similarity", model=saved, trust_remote_code=True
)([{"sentence1": a, "sentence2": b, "condition": c} for a, b, c in zip(S1, S2, CONDITIONS)])])

# one condition for every row, as the trainer's prompts or in each row: the same training; none is an error
plain = Dataset.from_dict({"sentence1": S1, "sentence2": S2, "label": REGRESSION_LABELS})
same = Dataset.from_dict({"sentence1": S1, "rest": [[b, CONDITIONS[0]] for b in S2], "label": REGRESSION_LABELS})
shared = {}
for name, data, prompts in (("prompts", plain, CONDITIONS[0]), ("rows", same, None), ("none", plain, None)):
    model = cross_encoder(folders["regressor"])
    record("regressor " + name, lambda: train(
        CrossEncoderTrainer, CrossEncoderTrainingArguments, model, data, "regressor-" + name,
        loss=losses.MSELoss(model), prompts=prompts, steps=3,
    ))
    shared[name] = model.state_dict()
results["regressor none trainer files"] = written(os.path.join(root, "trainer-regressor-none"))
results["regressor prompts difference"] = max(
    float((shared["prompts"][key] - shared["rows"][key]).abs().max()) for key in shared["prompts"]
)

# a pair regressor with a sigmoid head (Comateformer), no condition
model = cross_encoder(folders["comateformer"])
pairs = [[a, b] for a, b in zip(S1, S2)]
results["comateformer before"] = model.predict(pairs).tolist()
pair_data = Dataset.from_dict({"text": S1, "text_pair": S2, "label": REGRESSION_LABELS})
record("comateformer mse", lambda: train(
    CrossEncoderTrainer, CrossEncoderTrainingArguments, model, pair_data, "comateformer", loss=losses.MSELoss(model)
))
results["comateformer after"] = model.predict(pairs).tolist()
saved, again = reloaded(model, "comateformer", CrossEncoder)
results["comateformer reloaded"] = again.predict(pairs).tolist()
record("comateformer pipeline", lambda: [output["score"] for output in pipeline(
    "pair-similarity", model=saved, trust_remote_code=True
)([{"text": a, "text_pair": b} for a, b in zip(S1, S2)])])

# a 3-class classifier with the default loss: the cross-entropy of its logits
model = cross_encoder(folders["classifier"])
labels = torch.tensor(CLASS_LABELS)
with torch.no_grad():
    logits = model[0].model(**model.preprocess(pairs)).logits
    results["classifier loss"] = float(losses.CrossEntropyLoss(model)([S1, S2], labels))
    results["classifier logits loss"] = float(torch.nn.functional.cross_entropy(logits, labels))
    # a loss of the user's own, outside sentence-transformers' package, reads the model in training mode (dropout off)
    dropouts = {m: m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    for m in dropouts:
        m.p = 0.0
    model.train()
    results["classifier training scores"] = model(model.preprocess(pairs))["scores"].tolist()
    model.eval()
    for m, p in dropouts.items():
        m.p = p
    results["classifier logits"] = logits.tolist()
classes = Dataset.from_dict({"text": S1, "text_pair": S2, "label": CLASS_LABELS})
record("classifier ce", lambda: train(CrossEncoderTrainer, CrossEncoderTrainingArguments, model, classes, "ce"))
with torch.no_grad():
    results["classifier loss after"] = float(losses.CrossEntropyLoss(model)([S1, S2], labels))
results["classifier after"] = model.predict(pairs).tolist()
saved, again = reloaded(model, "classifier", CrossEncoder)
results["classifier reloaded"] = again.predict(pairs).tolist()
record("classifier auto logits", lambda: AutoModelForSequenceClassification.from_pretrained(
    saved, trust_remote_code=True
)(**again.preprocess(pairs)).logits.softmax(-1))
record("classifier pipeline", lambda: pipeline("pair-similarity", model=saved, trust_remote_code=True)(
    [{"text": a, "text_pair": b} for a, b in zip(S1, S2)]
))

# CSR: the condition as prompts, as [sentence, condition] columns, or another condition
similarity = Dataset.from_dict({"sentence1": S1, "sentence2": S2, "score": [0.9, 0.1, 0.5]})
as_columns = Dataset.from_dict({
    "sentence1": [[s, CONDITIONS[0]] for s in S1], "sentence2": [[s, CONDITIONS[0]] for s in S2],
    "score": [0.9, 0.1, 0.5],
})
trained = {}
for name, data, prompts in (("prompts", similarity, CONDITIONS[0]), ("columns", as_columns, None),
                            ("other", similarity, OTHER), ("none", similarity, None)):
    csr = SentenceTransformer(folders["csr"], trust_remote_code=True, device="cpu")
    record("csr " + name, lambda: train(
        SentenceTransformerTrainer, SentenceTransformerTrainingArguments, csr, data, "csr-" + name,
        loss=st_losses.CosineSimilarityLoss(csr), prompts=prompts,
    ))
    trained[name] = csr
weights = {name: model.state_dict() for name, model in trained.items()}
results["csr columns difference"] = max(
    float((weights["prompts"][key] - weights["columns"][key]).abs().max()) for key in weights["prompts"]
)
results["csr other difference"] = max(
    float((weights["prompts"][key] - weights["other"][key]).abs().max()) for key in weights["prompts"]
)
results["csr embeddings"] = trained["prompts"].encode(S1, prompt=CONDITIONS[0]).tolist()
saved, again = reloaded(trained["prompts"], "csr", SentenceTransformer)
results["csr reloaded"] = again.encode(S1, prompt=CONDITIONS[0]).tolist()
first, second = (again.encode(texts, prompt=CONDITIONS[0]) for texts in (S1, S2))
results["csr similarity"] = again.similarity_pairwise(first, second).tolist()
record("csr pipeline", lambda: [output["score"] for output in pipeline(
    "conditional-similarity", model=saved, trust_remote_code=True
)([{"sentence1": a, "sentence2": b, "condition": CONDITIONS[0]} for a, b in zip(S1, S2)])])
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """case -> (model, export folder), and the fresh process's results."""
    root = tmp_path_factory.mktemp("st-training")
    built = {case: (model, folder) for case, (model, _, folder) in build_exports(EXPORTS, root).items()}
    folders = {case: str(folder) for case, (_, folder) in built.items()}
    data = [S1, S2, CONDITIONS, REGRESSION_LABELS, CLASS_LABELS, OTHER_CONDITION]
    proc = run_without_pairzoo(_SCRIPT, [json.dumps(folders), str(root), json.dumps(data)], timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-4000:]
    return built, json.loads(lines[0][len("PAIRZOO_RESULT ") :])


def _squared_error(predicted: "list[float]") -> float:
    return sum((p - y) ** 2 for p, y in zip(predicted, REGRESSION_LABELS)) / len(predicted)


def test_binary_cross_entropy_on_a_regressor_is_refused_before_any_weight_changes(trained):
    built, results = trained
    error = _error(results, "regressor bce")
    model = built["regressor"][0]
    scale = f"{model.config.label_min:g}-{model.config.label_max:g}"
    assert error.startswith("ValueError: BinaryCrossEntropyLoss (CrossEncoderTrainer's default for one label)")
    assert f"`losses.MSELoss(model)` and labels on the {scale} scale" in error
    assert results["regressor bce unchanged"] is True
    assert results["regressor bce trainer files"] == []  # the trainer's folder, which it makes first, stays empty


@pytest.mark.parametrize("case", ["regressor", "comateformer"])
def test_a_regressor_trained_with_mse_on_its_label_scale_moves_toward_the_labels(trained, case):
    _, results = trained
    assert _value(results[f"{case} mse"])["changed"] == _value(results[f"{case} mse"])["parameters"]
    before, after = results[f"{case} before"], results[f"{case} after"]
    assert _squared_error(after) < _squared_error(before)  # toward the labels on the scale the pipeline reads


@pytest.mark.parametrize("case", ["regressor", "comateformer"])
def test_a_trained_regressor_reloads_and_its_folder_scores_the_same_in_the_pipeline(trained, case):
    _, results = trained
    _close(results[f"{case} reloaded"], results[f"{case} after"])
    _close(_value(results[f"{case} pipeline"]), results[f"{case} after"])


def test_the_saved_regressor_loads_as_a_transformers_sequence_classifier(trained):
    built, results = trained
    assert _value(results["regressor auto class"]) == type(built["regressor"][0]).__name__


def test_one_condition_trains_the_same_as_the_trainers_prompts_or_in_every_row(trained):
    _, results = trained
    for name in ("prompts", "rows"):
        assert _value(results[f"regressor {name}"])["changed"] == _value(results[f"regressor {name}"])["parameters"]
    assert results["regressor prompts difference"] == 0.0


def test_training_a_conditional_model_without_its_condition_is_a_clear_error(trained):
    _, results = trained
    error = _error(results, "regressor none")
    assert error.startswith("ValueError: input 0 must be a tuple of 3 texts (sentence1, sentence2, condition)")
    assert "`prompt=`" in error
    assert results["regressor none trainer files"] == []


def test_the_correlation_evaluator_reads_the_cross_encoders_scores(trained):
    _, results = trained
    predicted = torch.tensor(results["regressor after"], dtype=torch.float64)
    gold = torch.tensor(REGRESSION_LABELS, dtype=torch.float64)
    pearson = float(torch.corrcoef(torch.stack([predicted, gold]))[0, 1])
    assert math.isclose(_value(results["regressor evaluator"])["dev_pearson"], pearson, abs_tol=1e-6)


def test_a_classifier_trains_on_the_cross_entropy_of_its_logits(trained):
    _, results = trained
    assert math.isclose(results["classifier loss"], results["classifier logits loss"], abs_tol=1e-6)
    _close(results["classifier training scores"], results["classifier logits"])  # any loss gets logits in training
    assert _value(results["classifier ce"])["changed"] == _value(results["classifier ce"])["parameters"]
    assert results["classifier loss after"] < results["classifier loss"]


def test_a_trained_classifier_reloads_and_its_folder_gives_the_same_probabilities(trained):
    _, results = trained
    probabilities = results["classifier after"]
    assert all(len(row) == len(LABELS) and math.isclose(sum(row), 1.0, abs_tol=1e-5) for row in probabilities)
    _close(results["classifier reloaded"], probabilities)
    _close(_value(results["classifier auto logits"]), probabilities)
    for row, output in zip(probabilities, _value(results["classifier pipeline"])):
        best = max(range(len(row)), key=row.__getitem__)
        assert output["label"] == LABELS[best] and abs(output["score"] - row[best]) <= ATOL


def test_csr_trains_under_its_condition_as_prompts_or_as_columns(trained):
    _, results = trained
    for name in ("prompts", "columns", "other"):
        assert _value(results[f"csr {name}"])["changed"] == _value(results[f"csr {name}"])["parameters"], name
    assert results["csr columns difference"] == 0.0  # the same condition, given either way
    assert results["csr other difference"] > 1e-4  # another condition trains another model
    error = _error(results, "csr none")
    assert error.startswith("ValueError: input 0 must be a tuple of 2 texts (sentence, condition)")


def test_a_trained_csr_reloads_with_the_same_embeddings_and_the_pipelines_scores(trained):
    built, results = trained
    _close(results["csr reloaded"], results["csr embeddings"])
    config = built["csr"][0].config
    span = config.label_max - config.label_min
    _close(_value(results["csr pipeline"]), [config.label_min + span * s for s in results["csr similarity"]])
