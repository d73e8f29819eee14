"""Knowledge-graph text files (`entity2text.txt`, `relation2text.txt`): two relations with one text are refused with
one line naming the file, both ids and the text (the model knows a relation by its text only, so they would become
one relation), while entities sharing a text, common in real graphs, stay distinct entities."""

import json

import pytest

from pairzoo.train_kg import console_main
from pairzoo.training.data import load_dataset, load_kg_entities, load_kg_folder
from pairzoo.training.kg import KgArguments, kg_examples, known_answers, run_kg

TRAIN = [("dog", "_hypernym", "animal"), ("bank1", "_hypernym", "land"), ("bank2", "_hypernym", "firm")]
TRAIN += [("dog", "_similar_to", "wolf"), ("wolf", "_hypernym", "animal")]
DEV = [("bank2", "_similar_to", "firm"), ("bank1", "_similar_to", "land")]
ENTITIES = {
    "dog": "dog, a domesticated canine",
    "wolf": "wolf, a wild canine",
    "animal": "animal, a living organism",
    "land": "land, the solid ground",
    "firm": "firm, a business",
    "bank1": "bank, a word",  # two entities (a river bank, a money bank) with one text
    "bank2": "bank, a word",
}


def _graph(folder, relations: str = "_hypernym\thypernym\n_similar_to\tsimilar to\n") -> str:
    folder.mkdir(parents=True)
    (folder / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in ENTITIES.items()))
    (folder / "relation2text.txt").write_text(relations)
    (folder / "train.tsv").write_text("".join("\t".join(t) + "\n" for t in TRAIN))
    (folder / "dev.tsv").write_text("".join("\t".join(t) + "\n" for t in DEV))
    return str(folder)


SHARED_TEXTS = [
    ("_hypernym\thypernym\n_similar_to\tsimilar to\n_is_a\thypernym\n", "_hypernym", 1, "_is_a", 3, "hypernym"),
    (
        "_hypernym\thypernym\n_similar_to\tsimilar  to \n_like\tsimilar to\n",
        "_similar_to",
        2,
        "_like",
        3,
        "similar to",
    ),
]


@pytest.mark.parametrize("relations, first, first_line, second, line, text", SHARED_TEXTS, ids=["same", "spaces"])
def test_two_relations_with_one_text_are_refused_naming_the_file_both_ids_and_the_text(
    tmp_path, capsys, relations, first, first_line, second, line, text
):
    kg_dir = _graph(tmp_path / "graph", relations)
    path = str(tmp_path / "graph" / "relation2text.txt")
    expected = (
        f"{path!r} line {line}: relations {first!r} (line {first_line}) and {second!r} have the same text {text!r}, "
        "so the model could not tell them apart; give each relation its own text."
    )
    with pytest.raises(ValueError) as raised:
        load_kg_folder(kg_dir)
    assert str(raised.value) == expected
    (tmp_path / "data").mkdir()
    (tmp_path / "graph").rename(tmp_path / "data" / "WN18RR")  # the same files as the shared data's WN18RR
    with pytest.raises(ValueError, match="have the same text"):
        load_dataset("wn18rr", data_dir=str(tmp_path / "data"))
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--kg_dir", str(tmp_path / "data" / "WN18RR"), "--output_dir", str(out)]
    assert console_main([*argv, "--max_steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pairzoo.train_kg: error: ") and "have the same text" in err and "\n" not in err
    assert f"{first!r}" in err and f"{second!r}" in err and not out.exists()


def test_entities_sharing_a_text_stay_distinct_entities_through_loading_and_training(tmp_path):
    kg_dir = _graph(tmp_path / "graph")
    entities = load_kg_entities(kg_dir=kg_dir)
    assert list(entities["entity_id"]) == list(ENTITIES) and list(entities["text"]) == list(ENTITIES.values())
    data = load_kg_folder(kg_dir)
    banks = [r for r in data["train"] if r["head"] == "bank, a word"]
    assert [(r["head_id"], r["tail_id"]) for r in banks] == [("bank1", "land"), ("bank2", "firm")]
    known = known_answers(kg_examples(list(data["train"])))
    assert known[("bank1", "hypernym")] == {"land"} and known[("bank2", "hypernym")] == {"firm"}
    assert known[("land", "inverse hypernym")] == {"bank1"} and known[("firm", "inverse hypernym")] == {"bank2"}
    args = KgArguments(
        backbone="tiny-bert",
        kg_dir=kg_dir,
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        batch_size=4,
        max_length=16,
        eval_batch_size=4,
        export=False,
    )
    run_kg(args)
    dev = json.loads((tmp_path / "out" / "metrics.json").read_text())["dev"]
    assert dev["num_entities"] == len(ENTITIES) and dev["num_queries"] == 2 * len(DEV)  # with the inverse queries
    assert 0 < dev["mrr"] <= 1


def test_relations_one_tokenizer_reads_as_one_text_are_refused_naming_both(tmp_path, capsys):
    """`Hypernym` and `hypernym` differ as written (the file accepts them) but an uncased tokenizer (tiny-bert's,
    MiniLM's) reads them as one text: refused before anything is written, naming both and the backbone. A cased
    tokenizer (tiny-roberta's) tells them apart, so the same graph trains."""
    kg_dir = _graph(tmp_path / "graph", "_hypernym\tHypernym\n_similar_to\tsimilar to\n_is_a\thypernym\n")
    triples = [*TRAIN, ("dog", "_is_a", "animal")]
    (tmp_path / "graph" / "train.tsv").write_text("".join("\t".join(t) + "\n" for t in triples))
    out = tmp_path / "out"
    argv = ["--backbone", "tiny-bert", "--kg_dir", kg_dir, "--output_dir", str(out), "--max_steps", "1"]
    assert console_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "pairzoo.train_kg: error: relations 'Hypernym' and 'hypernym' are the same tokens for the tokenizer of "
        "--backbone 'tiny-bert', so the model could not tell their queries apart; give each relation its own text "
        "(relation2text.txt)."
    )
    assert not out.exists()
    args = KgArguments(backbone="tiny-roberta", kg_dir=kg_dir, output_dir=str(out), max_steps=1, batch_size=4,
                       max_length=16, eval_batch_size=4, export=False)  # fmt: skip
    assert 0 < run_kg(args)["dev"]["mrr"] <= 1
