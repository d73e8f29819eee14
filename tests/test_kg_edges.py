"""Knowledge-graph link prediction at its edges: tied scores ranked realistically (the mean of the optimistic and the
pessimistic rank, Sun et al. 2020) beside the optimistic figures, `--max_length` values that leave no text or exceed
the backbone, and broken WN18RR files (each a one-line error naming the file and line, nothing written)."""

import json
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from transformers import set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.metrics import load_metric
from pairzoo.train_kg import console_main
from pairzoo.training.cli import NonFiniteLossError
from pairzoo.training.data import load_dataset, load_kg_entities
from pairzoo.training.kg import (
    KgArguments,
    KgContrastiveModel,
    check_kg_max_length,
    evaluate_kg,
    known_answers,
    run_kg,
)

WORDS = ["dog", "cat", "tree", "car", "house", "bird", "fish"]  # one WordPiece token each in tiny-bert


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


class _TableModel(nn.Module):
    """Entity embeddings set by hand per word (its first token); every query embeds as `query`, so an entity's score
    is its first coordinate when `query` is (1, 0)."""

    def __init__(self, tokenizer, entities: dict, query: "tuple[float, float]" = (1.0, 0.0)) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the model a device
        self.config = SimpleNamespace(backbone_config=SimpleNamespace(hidden_size=2))
        self.entities = {tokenizer(w)["input_ids"][1]: torch.tensor(v) for w, v in entities.items()}
        self.query = torch.tensor(query)

    def embed_plain(self, input_ids, attention_mask):
        return torch.stack([self.entities[int(i)] for i in input_ids[:, 1]])

    def forward(self, input_ids, **kwargs):
        return SimpleNamespace(embeddings=self.query.expand(len(input_ids), 2))


def _point(x: float) -> "tuple[float, float]":
    """A unit vector whose cosine with (1, 0) is `x`."""
    return (x, math.sqrt(1 - x * x))


def _query(head: str, relation: str, tail: str) -> dict:
    return {"head_id": head, "head": head, "relation": relation, "tail_id": tail, "tail": tail}


# --------------------------------------------------------------------------------------------- tied ranks


def test_ties_get_the_mean_of_the_optimistic_and_pessimistic_rank(tokenizer):
    # dog scores above the target car; cat, tree and house tie with car; bird is below; fish is the head (excluded)
    scores = {"dog": 0.9, "cat": 0.5, "tree": 0.5, "car": 0.5, "house": 0.5, "bird": 0.1, "fish": 0.95}
    model = _TableModel(tokenizer, {w: _point(x) for w, x in scores.items()})
    queries = [
        _query("fish", "part", "car"),  # 1 greater, 3 tied: optimistic 2, pessimistic 5 -> 3.5
        _query("fish", "near", "car"),  # cat is a known answer (filtered): 2 tied left -> 1 + 1 + 2 / 2 = 3
        _query("fish", "far", "bird"),  # below everything, no tie: 6 candidates -> 6 under both protocols
    ]
    known = known_answers(queries + [_query("fish", "near", "cat")])
    metrics = evaluate_kg(KgContrastiveModel(model), tokenizer, queries, WORDS, WORDS, known, "tri", max_length=8)
    realistic, optimistic = [3.5, 3.0, 6.0], [2, 2, 6]
    assert metrics["mrr"] == pytest.approx(sum(1 / r for r in realistic) / 3)
    assert metrics["mrr_optimistic"] == pytest.approx(sum(1 / r for r in optimistic) / 3)
    for k in (1, 3, 10):
        assert metrics[f"hits@{k}"] == pytest.approx(sum(r <= k for r in realistic) / 3)
        assert metrics[f"hits@{k}_optimistic"] == pytest.approx(sum(r <= k for r in optimistic) / 3)
    assert metrics["hits@3"] == pytest.approx(1 / 3) and metrics["hits@3_optimistic"] == pytest.approx(2 / 3)
    assert (metrics["tied_queries"], metrics["tied_fraction"]) == (2, pytest.approx(2 / 3))
    assert (metrics["num_queries"], metrics["num_entities"]) == (3, 7)


def test_entities_that_all_look_alike_rank_in_the_middle_not_first(tokenizer):
    # a real tiny-bert encoder that sees the same text for every entity: every score ties (what `--max_length 2` did)
    set_seed(0)
    kg = KgContrastiveModel(create_model("csr", backbone="tiny-bert").eval())
    queries = [_query("dog", "part", "car"), _query("cat", "part", "tree"), _query("tree", "part", "tree")]
    known = known_answers(queries + [_query("dog", "part", "house")])
    texts = ["a thing"] * len(WORDS)
    metrics = evaluate_kg(kg, tokenizer, queries, WORDS, texts, known, "tri", max_length=16)
    # candidates left after filtering: dog/car drops dog (head) and house (known); cat/tree drops cat; tree/tree none
    candidates = [len(WORDS) - 2, len(WORDS) - 1, len(WORDS)]
    assert metrics["mrr"] == pytest.approx(sum(2 / (1 + c) for c in candidates) / 3)
    assert metrics["mrr"] < 0.4 and metrics["hits@1"] == 0.0
    assert metrics["mrr_optimistic"] == 1.0 and metrics["hits@1_optimistic"] == 1.0
    assert (metrics["tied_queries"], metrics["tied_fraction"]) == (3, 1.0)


def test_without_ties_both_protocols_agree(tokenizer):
    set_seed(0)
    kg = KgContrastiveModel(create_model("csr", backbone="tiny-bert").eval())
    texts = [f"{w}, a word about {w}" for w in WORDS]
    queries = [_query("dog", "part", "car"), _query("cat", "near", "tree"), _query("bird", "part", "fish")]
    metrics = evaluate_kg(kg, tokenizer, queries, WORDS, texts, known_answers(queries), "tri", max_length=16)
    assert metrics["tied_queries"] == 0 and metrics["tied_fraction"] == 0.0
    for key in ("mrr", "hits@1", "hits@3", "hits@10"):
        assert metrics[key] == metrics[f"{key}_optimistic"]
    assert 0 < metrics["mrr"] <= 1


def test_nan_scores_are_not_ranked_first(tokenizer):
    model = _TableModel(tokenizer, {w: (1.0, 0.0) for w in WORDS}, query=(math.nan, 0.0))
    with pytest.raises(NonFiniteLossError, match="NaN"):
        evaluate_kg(KgContrastiveModel(model), tokenizer, [_query("dog", "part", "car")], WORDS, WORDS, {}, "tri")


def test_ranking_metric_reads_half_integer_ranks():
    got = load_metric("ranking").compute(predictions=[3.5, 1, 10.5], ks=(1, 3, 10))
    assert got["mrr"] == pytest.approx((1 / 3.5 + 1 + 1 / 10.5) / 3)
    assert (got["hits@1"], got["hits@3"], got["hits@10"]) == pytest.approx((1 / 3, 1 / 3, 2 / 3))
    for bad in ([math.nan], [math.inf], [0.5]):
        with pytest.raises(ValueError, match=">= 1"):
            load_metric("ranking").compute(predictions=bad)


# --------------------------------------------------------------------------------------------- --max_length


def test_max_length_must_leave_a_text_token_and_fit_the_relation(tokenizer):
    special = tokenizer.num_special_tokens_to_add(pair=False)
    with pytest.raises(ValueError, match=f"`max_length` is {special}.*>= {special + 1}"):
        check_kg_max_length(special, tokenizer, "tri")
    check_kg_max_length(special + 1, tokenizer, "tri", ["inverse similar to"])  # tri truncates each text alone
    relation = "inverse similar to"
    needed = len(tokenizer(" " + relation, add_special_tokens=False)["input_ids"]) + 4  # [CLS] h [SEP] r [SEP]
    with pytest.raises(ValueError, match=f"`--max_length` is {needed - 1}.*{relation!r}"):
        check_kg_max_length(needed - 1, tokenizer, "bi", ["similar to", relation], name="--max_length")
    check_kg_max_length(needed, tokenizer, "bi", ["similar to", relation], name="--max_length")
    config = SimpleNamespace(max_position_embeddings=40, model_type="bert")
    with pytest.raises(ValueError, match="`--max_length` is 41, above the backbone's limit of 40"):
        check_kg_max_length(41, tokenizer, "tri", backbone_config=config, name="--max_length")
    with pytest.raises(ValueError, match="`max_length` is 2"):
        model = _TableModel(tokenizer, {w: (1.0, 0.0) for w in WORDS})
        evaluate_kg(KgContrastiveModel(model), tokenizer, [_query("dog", "a", "car")], WORDS, WORDS, {}, "tri", 2)


TEXTS = {w: f"{w}, a word" for w in WORDS}
TRAIN = [("dog", "_hypernym", "cat"), ("tree", "_hypernym", "house"), ("car", "_similar_to", "bird")]
DEV = [("cat", "_similar_to", "dog"), ("fish", "_hypernym", "tree")]


def _write_graph(root, **files: str) -> str:
    """A tiny WN18RR-layout folder under `root/WN18RR`, any file replaced by `files` (name with `.` as `_`)."""
    folder = root / "WN18RR"
    folder.mkdir(parents=True)
    default = {
        "entity2text.txt": "".join(f"{e}\t{t}\n" for e, t in TEXTS.items()),
        "relation2text.txt": "_hypernym\thypernym\n_similar_to\tsimilar to\n",
        "train.tsv": "".join("\t".join(t) + "\n" for t in TRAIN),
        "dev.tsv": "".join("\t".join(t) + "\n" for t in DEV),
    }
    for name, text in default.items():
        (folder / name).write_text(files.get(name.replace(".", "_"), text))
    return str(root)


BAD_LENGTHS = [
    ([], "2", "leaves no token"),
    ([], "513", "above the backbone's limit of 512"),
    (["--config_overrides", '{"architecture": "bi"}'], "6", "the relation 'inverse hypernym'"),  # the longest
]


@pytest.mark.parametrize("extra, length, named", BAD_LENGTHS, ids=[b[2] for b in BAD_LENGTHS])
def test_bad_max_length_fails_with_one_line_and_writes_nothing(tmp_path, capsys, extra, length, named):
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--data_dir", _write_graph(tmp_path / "data"), "--output_dir", str(out)]
    assert console_main([*argv, "--max_steps", "2", "--max_length", length, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairzoo.train_kg: error: `--max_length` is ") and named in err and "\n" not in err
    assert not out.exists()


def test_a_run_reports_both_protocols_and_the_tied_queries(tmp_path):
    special = load_tokenizer("tiny-bert").num_special_tokens_to_add(pair=False)
    args = KgArguments(
        backbone="tiny-bert",
        data_dir=_write_graph(tmp_path / "data"),
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        batch_size=2,
        max_length=special + 1,  # the shortest length allowed: one token of each text ("dog", "cat", ...)
        eval_batch_size=4,
        export=False,
    )
    run_kg(args)
    dev = json.loads((tmp_path / "out" / "metrics.json").read_text())["dev"]
    assert dev["num_queries"] == 4 and dev["num_entities"] == len(WORDS)
    assert 0 <= dev["tied_fraction"] <= 1 and dev["tied_queries"] == round(dev["tied_fraction"] * 4)
    assert 0 < dev["mrr"] <= dev["mrr_optimistic"] <= 1
    assert dev["hits@10"] == dev["hits@10_optimistic"] == 1.0  # 7 entities: every rank is <= 7


# --------------------------------------------------------------------------------------------- WN18RR files

BAD_FILES = [
    ("entity2text.txt", {"entity2text_txt": "dog\tdog, a word\ncat\tcat, a word\ndog\tdog again\n"}, "line 3"),
    ("entity2text.txt", {"entity2text_txt": "dog\tdog, a word\ncat\tcat,\ta word\n"}, "line 2"),
    ("entity2text.txt", {"entity2text_txt": "dog\tdog, a word\ncat\t \n"}, "line 2"),
    ("entity2text.txt", {"entity2text_txt": "dog\tdog, a word\n\tno id\n"}, "line 2"),
    ("entity2text.txt", {"entity2text_txt": ""}, "has no rows"),
    ("relation2text.txt", {"relation2text_txt": "_hypernym\thypernym\n_hypernym\tis a\n"}, "line 2"),
    ("relation2text.txt", {"relation2text_txt": "_hypernym\thypernym\t?\n"}, "line 1"),
    ("relation2text.txt", {"relation2text_txt": ""}, "has no rows"),
    ("train.tsv", {"train_tsv": "dog\t_hypernym\tcat\ntree\t_hypernym\n"}, "line 2"),
    ("train.tsv", {"train_tsv": "dog\t_hypernym\tcat\t1\n"}, "line 1"),
    ("train.tsv", {"train_tsv": "dog\t_hypernym\tcat\nwolf\t_hypernym\tdog\n"}, "line 2"),
    ("train.tsv", {"train_tsv": "dog\t_part_of\tcat\n"}, "line 1"),
    ("train.tsv", {"train_tsv": ""}, "has no rows"),
    ("dev.tsv", {"dev_tsv": "cat\t_similar_to\tdog\n\n"}, "line 2"),
    ("dev.tsv", {"dev_tsv": ""}, "has no rows"),
]
BAD_FILE_IDS = [f"{file}:{named}:{i}" for i, (file, _, named) in enumerate(BAD_FILES)]


@pytest.mark.parametrize("file, files, named", BAD_FILES, ids=BAD_FILE_IDS)
def test_broken_wn18rr_files_are_one_line_errors_naming_file_and_line(tmp_path, capsys, file, files, named):
    data_dir = _write_graph(tmp_path / "data", **files)
    loaders = [lambda: load_dataset("wn18rr", data_dir=data_dir)]
    if file == "entity2text.txt":
        loaders.append(lambda: load_kg_entities(data_dir))
    for load in loaders:
        with pytest.raises(ValueError) as raised:
            load()
        assert file in str(raised.value) and named in str(raised.value)
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--data_dir", data_dir, "--output_dir", str(out), "--max_steps", "2"]
    assert console_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairzoo.train_kg: error: ") and file in err and named in err and "\n" not in err
    assert not out.exists()


def test_well_formed_files_load_each_entity_once_and_an_empty_test_file_is_held_out(tmp_path, caplog):
    data_dir = _write_graph(tmp_path / "data")
    (tmp_path / "data" / "WN18RR" / "test.tsv").write_text("")
    entities = load_kg_entities(data_dir)
    assert list(entities["entity_id"]) == WORDS and list(entities["text"]) == list(TEXTS.values())
    data = load_dataset("wn18rr", data_dir=data_dir)
    assert sorted(data) == ["train", "validation"] and "held out" in caplog.text
    assert data["validation"][0] == {
        "head_id": "cat",
        "head": "cat, a word",
        "relation": "similar to",
        "tail_id": "dog",
        "tail": "dog, a word",
    }
    with pytest.raises(FileNotFoundError, match="test.tsv.*held out"):
        load_dataset("wn18rr", data_dir=data_dir, split="test")
