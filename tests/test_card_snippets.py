"""Model cards whose code runs as written, and whose claims hold.

One tiny export per family, each written to a folder given the way a user gives one (relative to the working
directory, or absolute). Every ```python block of each card is run as written, all cards in one fresh process in which
`import pairzoo` fails, from the directory the exports were written from: each block must run, and each `print(...)`
must print what its comment says (an exact value, or a Python literal whose `...` stand for any number or text). What
the prose claims is checked against the printed values: a CrossEncoder's `predict` gives the pipeline's score, CSR's
`label_min + span * cosine` is the pipeline's score and lies in the range the card states, a classifier's label is one
of those the card lists. The metadata (`pipeline_tag`, `datasets`, licence) follows the task and the data's terms;
titles are short and complete; `push` points every snippet at the repo; no file of an export holds a path of the
machine that wrote it; and a model trained without a second sentence refuses one.
"""

import ast
import json
import math
import re
from pathlib import Path

import pytest
import torch
import yaml
from transformers import BertConfig, BertModel, pipeline, set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.backbones import minilm_path
from pairzoo.hub_cards import export_model, load_export, render_model_card, run_without_pairzoo, verify_export
from pairzoo.hub_cards.export import backbone_name
from pairzoo.hub_cards.push import checked_card
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from pairzoo.training.kg import KgArguments, KgContrastiveModel, run_kg

REPO = Path(__file__).resolve().parents[1]
ABSA = {0: "negative", 1: "neutral", 2: "positive"}
NLI = {0: "entailment", 1: "neutral", 2: "contradiction"}
ABSOLUTE = "<absolute>"
# case -> (family, config overrides, task kind, folder (relative to the working directory, or ABSOLUTE), the
# training data set, the expected pipeline_tag, licence and Hub data sets)
CASES = {
    "cross-encoder": (
        "cross-encoder", {}, "conditional-similarity", "cards/cross-encoder", "synthetic",
        "text-ranking", "apache-2.0", None,
    ),
    "seaver-absa": (
        "seaver", {"id2label": ABSA}, "conditional-classification", "cards/seaver-absa", "absa-restaurants",
        "text-classification", "other", None,
    ),
    "csr": ("csr", {"architecture": "bi"}, None, ABSOLUTE, None, None, "apache-2.0", None),
    "comateformer": (
        "comateformer",
        {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3], "num_labels": 1, "regression_loss": "bce",
         "label_min": 0.0, "label_max": 5.0},
        "pair-regression", "cards/comateformer", "stsb", "text-ranking", "other", ["nyu-mll/glue"],
    ),
    "siamese-matcher": (
        "siamese-matcher", {"hidden_size": 64, "max_sequence_length": 32, "id2label": {0: "0", 1: "1"}},
        "pair-classification", "./cards/siamese-matcher", "mrpc", "text-classification", "other", ["nyu-mll/glue"],
    ),
    "neighbor-attention": (
        "neighbor-attention", {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "id2label": NLI},
        "pair-classification", "cards/neighbor-attention", "sick-e", "text-classification", "cc-by-nc-sa-3.0", None,
    ),
}  # fmt: skip

_SCRIPT = r"""
import contextlib, io, json, sys, traceback
from transformers import pipeline

jobs = json.loads(sys.argv[1])
results, failed = {}, False
for case, blocks in jobs["cards"].items():
    results[case] = []
    for i, code in enumerate(blocks):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"<{case} card, python block {i}>", "exec"), {"__name__": "__main__"})
            results[case].append({"stdout": out.getvalue()})
        except Exception:
            failed = True
            results[case].append({"stdout": out.getvalue(), "error": traceback.format_exc()})
scorer = pipeline("conditional-similarity", model=jobs["refusing"], trust_remote_code=True)
try:
    scorer({"sentence1": "The pasta was great.", "sentence2": "The service was slow.", "condition": "service"})
    refusal = None
except ValueError as err:
    refusal = str(err)
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps({"cards": results, "refusal": refusal}))
sys.exit(1 if failed else 0)
"""


def _training(dataset: "str | None") -> "dict | None":
    return None if dataset is None else {"dataset": dataset, "epochs": 1.0, "learning_rate": 2e-5}


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    """case -> (model, export folder as given, its absolute path); the fresh process's results; the working
    directory the exports were written from."""
    root = tmp_path_factory.mktemp("cards")
    tokenizer = load_tokenizer("tiny-bert")
    built = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        for case, (family, overrides, task, folder, dataset, *_) in CASES.items():
            set_seed(0)
            model = create_model(family, backbone="tiny-bert", **overrides).eval()
            given = str(root / "absolute" / case) if folder == ABSOLUTE else folder
            export_model(model, tokenizer, given, task=task, training=_training(dataset))
            built[case] = (model, given, (root / given).resolve())
    jobs = {
        "cards": {case: _python_blocks(path / "README.md") for case, (_, _, path) in built.items()},
        "refusing": str(built["seaver-absa"][2]),
    }
    proc = run_without_pairzoo(_SCRIPT, [json.dumps(jobs)], timeout=300, cwd=root)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-4000:]
    return built, json.loads(lines[0][len("PAIRZOO_RESULT ") :]), proc.returncode


def _python_blocks(card: Path) -> "list[str]":
    return re.findall(r"^```python\n(.*?)^```$", card.read_text(), flags=re.DOTALL | re.MULTILINE)


def _printed_claims(block: str) -> "list[str]":
    """The comment after each `print(...)` of a block: what the card says it prints."""
    return [line.split("  # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]


def _fits(value, shape) -> bool:
    """Whether a printed Python value has the form of a card's comment: `...` stands for any number or text."""
    if shape is Ellipsis:
        return isinstance(value, str) or (isinstance(value, (int, float)) and math.isfinite(value))
    if isinstance(shape, dict):
        return isinstance(value, dict) and set(value) == set(shape) and all(_fits(value[k], shape[k]) for k in shape)
    if isinstance(shape, list):
        return isinstance(value, list) and len(value) == len(shape) and all(map(_fits, value, shape))
    return value == shape


def _printed(results: dict, case: str) -> "list[list]":
    """Per python block of `case`'s card, the values its prints printed (parsed where they are literals)."""
    blocks = []
    for block in results["cards"][case]:
        values = []
        for line in block["stdout"].splitlines():
            try:
                values.append(ast.literal_eval(line))
            except (ValueError, SyntaxError):
                values.append(line)
        blocks.append(values)
    return blocks


def test_every_python_block_runs_as_written_without_pairzoo(cards):
    _, results, returncode = cards
    errors = {case: [b["error"] for b in blocks if "error" in b] for case, blocks in results["cards"].items()}
    assert returncode == 0 and not any(errors.values()), errors
    assert {case: len(blocks) for case, blocks in results["cards"].items()} == {case: 2 for case in CASES}


@pytest.mark.parametrize("case", list(CASES))
def test_each_print_prints_what_its_comment_says(cards, case):
    built, results, _ = cards
    blocks = _python_blocks(built[case][2] / "README.md")
    for block, printed in zip(blocks, _printed(results, case)):
        claims = _printed_claims(block)
        assert len(printed) == len(claims) > 0, (block, printed)
        for value, claim in zip(printed, claims):
            try:
                shape = ast.literal_eval(claim)
            except (ValueError, SyntaxError):
                assert value == claim, (value, claim)  # an exact value, such as the model class
                continue
            assert _fits(value, shape), (value, claim)


@pytest.mark.parametrize("case", list(CASES))
def test_what_the_card_says_of_the_scores_holds(cards, case):
    built, results, _ = cards
    model, _, folder = built[case]
    card = (folder / "README.md").read_text()
    (output, class_name), (other,) = _printed(results, case)
    assert class_name == type(model).__name__
    config = model.config
    if config.num_labels > 1:  # the pipeline's label is the argmax of the CrossEncoder's probabilities
        labels = list(config.id2label.values())
        assert f"the most probable class ({', '.join(labels)}) and its probability" in card
        (row,) = other
        assert output["label"] == labels[row.index(max(row))] and output["score"] == pytest.approx(max(row), abs=1e-5)
        assert sum(row) == pytest.approx(1.0, abs=1e-5)
        return
    low, high = config.label_min, config.label_max
    if case == "csr":  # label_min + span * cosine, on [2 label_min - label_max, label_max], as the card says
        assert other == pytest.approx(output["score"], abs=1e-4)
        assert f"so they lie in [{2 * low - high:g}, {high:g}]" in card and 2 * low - high <= other <= high
    else:  # CrossEncoder.predict returns the pipeline's score
        assert other == [pytest.approx(output["score"], abs=1e-5)]
    if getattr(config, "regression_loss", "mse") == "bce":
        assert f"Scores lie on the {low:g}-{high:g} scale" in card and low <= output["score"] <= high


def _front(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])


@pytest.mark.parametrize("case", list(CASES))
def test_metadata_title_and_licence_follow_the_task_and_the_data(cards, case):
    built, _, _ = cards
    _, _, task, _, dataset, tag, licence, hub_datasets = CASES[case]
    folder = built[case][2]
    card, front = (folder / "README.md").read_text(), _front(folder)
    assert front.get("pipeline_tag") == tag and front.get("pipeline_tag") != "sentence-similarity"
    assert front["license"] == licence and front.get("datasets") == hub_datasets
    assert (front.get("license_name") is not None) == (licence == "other")
    licence_section = card[card.index("## Licence\n") : card.index("## Citation\n")]
    if dataset in ("absa-restaurants", "stsb", "mrpc", "sick-e"):
        expected = {"absa-restaurants": "SemEval-2014 Task 4", "stsb": "CC BY-SA 4.0", "mrpc": "non-commercial",
                    "sick-e": "CC BY-NC-SA 3.0"}[dataset]  # fmt: skip
        assert expected in licence_section
    title = re.search(r"^# (.+)$", card, flags=re.MULTILINE).group(1)
    assert len(title) <= 80 and title.endswith(" on tiny-bert") and "=" not in title
    assert title.count("(") == title.count(")") and title.count("`") % 2 == 0


def test_a_conditional_classification_card_shows_a_sentence_and_an_aspect(cards):
    built, results, _ = cards
    card = (built["seaver-absa"][2] / "README.md").read_text()
    blocks = _python_blocks(built["seaver-absa"][2] / "README.md")
    assert '{"sentence1": "The pasta was wonderful but the service was slow.", "condition": "service"}' in blocks[0]
    assert "sentence2" not in "".join(blocks) and "the pipeline refuses a `sentence2`" in card
    assert results["refusal"] is not None and "`sentence2`" in results["refusal"]  # the exported pipeline refuses


def test_the_pipeline_refuses_a_second_sentence_only_for_a_model_trained_without_one(cards):
    built, _, _ = cards
    absa, tokenizer = load_export(built["seaver-absa"][2])
    scorer = pipeline("conditional-similarity", model=absa, tokenizer=tokenizer)
    aspect = {"sentence1": "The pasta was wonderful.", "condition": "pasta"}
    assert scorer(aspect)["label"] in ABSA.values()
    with pytest.raises(
        ValueError, match=r"Input has `sentence2`, but this model was trained on inputs of `sentence1` and"
    ):
        scorer({**aspect, "sentence2": "The service was slow."})
    with pytest.raises(ValueError, match=r"input 1 of 2: Input has `sentence2`"):
        scorer([aspect, {**aspect, "sentence2": "The service was slow."}])
    similarity, tokenizer = load_export(built["cross-encoder"][2])  # trained with two sentences: accepts them
    scored = pipeline("conditional-similarity", model=similarity, tokenizer=tokenizer)({**aspect, "sentence2": "Ok."})
    assert math.isfinite(scored["score"])


def test_verify_export_scores_a_conditional_classifier_with_its_own_inputs(cards):
    built, _, _ = cards
    assert built["seaver-absa"][2] / "README.md" in verify_export(built["seaver-absa"][2])


def test_push_points_every_snippet_at_the_repo(cards):
    built, _, _ = cards
    for case, (_, given, folder) in built.items():
        card = checked_card(folder, "org/name")
        code = "".join(re.findall(r"^```python\n(.*?)^```$", card, flags=re.DOTALL | re.MULTILINE))
        assert given not in code and str(folder) not in code, case
        loads = re.findall(r"(?:from_pretrained\(|model=|CrossEncoder\(|SentenceTransformer\()(\"[^\"]*\")", code)
        assert len(loads) >= 4 and set(loads) == {'"org/name"'}, (case, loads)
        assert "The snippets load this export from the folder" not in card and "org/name" in card


def test_no_file_of_an_export_holds_a_path_of_the_machine_that_wrote_it(tmp_path, monkeypatch):
    backbone = tmp_path / "backbones" / "local-bert"
    tokenizer = load_tokenizer("tiny-bert")
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64)).save_pretrained(backbone)  # fmt: skip
    tokenizer.save_pretrained(backbone)
    model = create_model("cross-encoder", backbone=str(backbone))
    monkeypatch.chdir(tmp_path)
    local = export_model(
        model, tokenizer, "out/export", base_model=str(backbone), training={"backbone": str(backbone), "seed": 0}
    )
    minilm = export_model(create_model("cross-encoder", backbone="minilm", pretrained=False), tokenizer, "minilm")
    for folder in (local, minilm):
        for path in sorted(tmp_path.joinpath(folder).rglob("*")):
            if path.is_file():
                text = path.read_bytes().decode("utf-8", errors="replace")
                for machine_path in (str(tmp_path), str(REPO), str(Path(minilm_path()).resolve())):
                    assert machine_path not in text, (path.name, machine_path)
    config = json.loads((local / "config.json").read_text())
    assert config["backbone_config"]["_name_or_path"] == "local-bert"
    assert json.loads((minilm / "config.json").read_text())["backbone_config"]["_name_or_path"] == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )
    assert "| backbone | local-bert |" in (local / "README.md").read_text()
    assert backbone_name(load_export(minilm)[0]) == "minilm"  # a reloaded export still finds its benchmark runs
    assert load_export(local)[0].config.backbone_config._name_or_path == "local-bert"


# --------------------------------------------------------------------------------------------- link prediction

KG_TEXTS = {
    "dog": "dog, a domesticated canine",
    "cat": "cat, a small domesticated feline",
    "animal": "animal, a living organism that moves",
    "oak": "oak, a tree with acorns",
    "tree": "tree, a tall woody plant",
    "plant": "plant, a living organism without senses",
}
KG_TRAIN = [("dog", "_hypernym", "animal"), ("cat", "_hypernym", "animal"), ("oak", "_hypernym", "tree")]
KG_TRAIN += [("tree", "_hypernym", "plant"), ("dog", "_similar_to", "cat")]
KG_MAX_LENGTH = 16  # shorter than the card's example head entity under its relation: the snippets must truncate

_BLOCKS_SCRIPT = r"""
import contextlib, io, json, sys, traceback

results = []
for i, code in enumerate(json.loads(sys.argv[1])):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"<python block {i}>", "exec"), {"__name__": "__main__"})
        results.append({"stdout": out.getvalue()})
    except Exception:
        results.append({"stdout": out.getvalue(), "error": traceback.format_exc()})
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""


@pytest.fixture(scope="module", params=["tri", "bi"])
def kg_export(request, tmp_path_factory):
    """A tiny CSR trained a few steps by `pairzoo.train_kg` on a hand-made graph: its architecture, export folder and
    card, and what each python block of the card printed, run as written in a fresh process without pairzoo."""
    root = tmp_path_factory.mktemp(f"kg-{request.param}")
    graph = root / "graph"
    graph.mkdir()
    (graph / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in KG_TEXTS.items()))
    (graph / "relation2text.txt").write_text("_hypernym\thypernym\n_similar_to\tsimilar to\n")
    (graph / "train.tsv").write_text("".join("\t".join(t) + "\n" for t in KG_TRAIN))
    (graph / "dev.tsv").write_text("cat\t_similar_to\tdog\n")
    run_kg(
        KgArguments(
            backbone="tiny-bert",
            config_overrides=json.dumps({"architecture": request.param}),
            kg_dir=str(graph),
            output_dir=str(root / "out"),
            max_steps=2,
            batch_size=4,
            max_length=KG_MAX_LENGTH,
            logging_steps=1,
            eval_batch_size=4,
        )
    )
    folder = root / "out" / "export"
    blocks = _python_blocks(folder / "README.md")
    proc = run_without_pairzoo(_BLOCKS_SCRIPT, [json.dumps(blocks)], timeout=300, cwd=root)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-4000:]
    return request.param, folder, blocks, json.loads(lines[0][len("PAIRZOO_RESULT ") :])


def test_a_link_prediction_card_describes_link_prediction(kg_export):
    _, folder, _, _ = kg_export
    card, front = (folder / "README.md").read_text(), _front(folder)
    assert re.search(r"^# CSR \(condition-specified routers\): link prediction on tiny-bert$", card, re.MULTILINE)
    assert "- **Task:** link prediction (knowledge-graph completion): it ranks candidate tail entities" in card
    assert "link-prediction" in front["tags"] and "conditional-similarity" not in front["tags"]
    (entry,) = front["model-index"][0]["results"]
    assert entry["task"]["type"] == "link-prediction" and entry["dataset"]["name"] == "graph"
    assert [m["type"] for m in entry["metrics"]] == ["mrr", "hits@1", "hits@3", "hits@10"]
    for metric in ("mrr", "hits@1", "hits@3", "hits@10"):
        assert f"| graph | validation | {metric} |" in card
    assert "head entity's text embedded under the relation's text" in card
    assert "python -m pairzoo.train_kg" in card and "python -m pairzoo.train --model" not in card
    assert f"| max_length | {KG_MAX_LENGTH} |" in card and "does not record its training recipe" not in card
    for conditional_similarity in ("The number of people.", "the predicted similarity", "two sentences judged"):
        assert conditional_similarity not in card


def test_a_link_prediction_cards_snippets_rank_tails_as_the_kg_evaluation_scores(kg_export):
    architecture, folder, blocks, results = kg_export
    assert [r.get("error") for r in results] == [None, None], results
    printed = _printed({"cards": {"kg": results}}, "kg")
    for block, values in zip(blocks, printed):
        claims = _printed_claims(block)
        assert len(values) == len(claims) > 0 and all(map(_fits, values, map(ast.literal_eval, claims)))
    head, relation = ast.literal_eval(re.search(r"^head, relation = (.+)$", blocks[0], re.MULTILINE).group(1))
    candidates = ast.literal_eval(re.search(r"^candidates = (.+)$", blocks[0], re.MULTILINE).group(1))
    model, tokenizer = load_export(folder)
    kg = KgContrastiveModel(model.eval())  # what `evaluate_kg` ranks with: (head | relation) queries, plain tails
    encode = encode_tri_inputs if architecture == "tri" else encode_bi_inputs
    with torch.no_grad():
        query = kg.query_embeddings(encode(tokenizer, [head], None, [relation], max_length=KG_MAX_LENGTH))
        tails = tokenizer(candidates, padding=True, truncation=True, max_length=KG_MAX_LENGTH, return_tensors="pt")
        expected = (query @ kg.entity_embeddings(tails["input_ids"], tails["attention_mask"]).T)[0].tolist()
    (ranked, scores), (similarity,) = printed
    order = sorted(range(len(candidates)), key=lambda i: -expected[i])
    assert ranked == [candidates[i] for i in order] and scores == pytest.approx([expected[i] for i in order], abs=1e-4)
    assert similarity == [pytest.approx(expected, abs=1e-4)]  # sentence-transformers gives the same scores


def test_a_link_prediction_export_verifies_and_its_snippets_follow_a_push(kg_export):
    _, folder, _, _ = kg_export
    assert folder / "README.md" in verify_export(folder)
    code = "".join(re.findall(r"^```python\n(.*?)^```$", checked_card(folder, "org/name"), re.DOTALL | re.MULTILINE))
    loads = re.findall(r"(?:model=|SentenceTransformer\()(\"[^\"]*\")", code)
    assert len(loads) == 2 and set(loads) == {'"org/name"'} and str(folder) not in code


@pytest.mark.parametrize(
    ("family", "metrics", "link_prediction"),
    [
        ("csr", {"mrr": 0.5, "hits@1": 0.25}, True),
        ("csr", {"spearman": 0.5}, False),
        ("cross-encoder", {"mrr": 0.5}, False),
    ],
)
def test_only_ranking_results_of_a_model_with_plain_embeddings_make_a_link_prediction_card(
    family, metrics, link_prediction
):
    model = create_model(family, backbone="tiny-bert")
    card = render_model_card(model, [{"dataset": "wn18rr", "split": "validation", "metrics": metrics}], None, None,
                             folder="export", versions={"python": "3"})  # fmt: skip
    assert ("link prediction on tiny-bert" in card) == link_prediction
    assert ("The number of people." in card) == (not link_prediction)  # the conditional-similarity example
