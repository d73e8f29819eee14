"""Task-adaptive MLM step (`pairzoo.adapt_mlm`): a tiny BERT adapted end to end, the folder as a backbone for
neighbor attention and the train CLI, and the bad inputs (clear one-line errors, nothing written)."""

import json
import re
import warnings
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoModelForMaskedLM, BertForMaskedLM, BertModel

from pairzoo import create_model, load_tokenizer
from pairzoo.adapt_mlm import ADAPTATION_FILE, MIN_SENTENCES, load_masked_lm, main, parse_args, training_sentences
from pairzoo.backbones import TINY_ARCHITECTURES, tiny_backbone_config
from pairzoo.train import console_main
from pairzoo.training.expressiveness import evaluate_expressiveness

SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set\n"
)
LABELS = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")
NA = {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4}


def _sick(folder: Path, train_pairs: int, heldout_pairs: int = 1) -> Path:
    """A SICK.txt with `train_pairs` TRAIN pairs (2 distinct sentences each) and `heldout_pairs` TRIAL and TEST pairs
    each, marked `heldout`; class labels cycle through the three classes."""
    rows = [(n, f"A man walks dog {n} in the park.", f"A woman reads book {n}.", "TRAIN") for n in range(train_pairs)]
    rows += [
        (100 + n, f"heldout {s} sentence {n}.", f"heldout other {n}.", s)
        for n, s in enumerate(("TRIAL", "TEST") * heldout_pairs)
    ]
    lines = [
        "\t".join([str(n), a, b, LABELS[n % 3], "3.0", "x", "y", a, b, "d", "d", split]) + "\n"
        for n, a, b, split in rows
    ]
    path = folder / "data" / "SICK" / "SICK.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SICK_HEADER + "".join(lines))
    return folder / "data"


def _backbone(folder: Path, with_head: bool = False, tokenizer: str = "tiny-bert") -> Path:
    """A saved tiny BERT: encoder only (as the bundled MiniLM), or with an MLM head; and a tokenizer."""
    torch.manual_seed(0)
    config = tiny_backbone_config("tiny-bert")
    (BertForMaskedLM if with_head else BertModel)(config).save_pretrained(folder)
    load_tokenizer(tokenizer).save_pretrained(folder)
    return folder


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _args(data: Path, backbone: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--dataset", "sick-e", "--data_dir", str(data), "--backbone", str(backbone), "--output_dir", str(out),
        "--max_steps", "2", "--batch_size", "4", "--max_length", "16", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def adapted(tmp_path_factory) -> "tuple[Path, Path, Path]":
    """(data folder, original backbone, adapted folder) of one 2-step adaptation."""
    root = tmp_path_factory.mktemp("adapt")
    data, backbone = _sick(root, 12), _backbone(root / "backbone")
    assert main(_args(data, backbone, root / "adapted")) == 0
    return data, backbone, root / "adapted"


def test_corpus_is_the_train_splits_distinct_sentences(tmp_path):
    data = _sick(tmp_path, 12)
    sentences = training_sentences("sick-e", str(data))
    assert len(sentences) == 24 and not any("heldout" in s for s in sentences)
    assert len(training_sentences("sick-e", str(data), max_train_samples=8)) == 16


def test_adapted_folder_has_a_tied_trained_mlm_head_and_records_its_budget(adapted):
    _, backbone, folder = adapted
    record = json.loads((folder / ADAPTATION_FILE).read_text())
    assert record["dataset"] == "sick-e" and record["split"] == "train" and record["sentences"] == 24
    assert record["mlm_head"] == "new" and record["budget"]["steps_done"] == 2
    assert record["budget"]["mlm_probability"] == 0.15
    mlm, info = AutoModelForMaskedLM.from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"]
    assert mlm.cls.predictions.decoder.weight.data_ptr() == mlm.bert.embeddings.word_embeddings.weight.data_ptr()
    original = BertModel.from_pretrained(backbone)
    assert not torch.equal(
        original.encoder.layer[0].attention.self.query.weight, mlm.bert.encoder.layer[0].attention.self.query.weight
    )
    assert load_tokenizer(str(folder)).vocab_size == mlm.config.vocab_size
    assert not [p.name for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_adapted_folder_keeps_the_original_backbones_pooler(adapted):
    _, backbone, folder = adapted
    original = BertModel.from_pretrained(backbone)
    loaded, info = BertModel.from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"]
    assert torch.equal(loaded.pooler.dense.weight, original.pooler.dense.weight)
    assert torch.equal(loaded.pooler.dense.bias, original.pooler.dense.bias)
    assert not AutoModelForMaskedLM.from_pretrained(folder, output_loading_info=True)[1]["missing_keys"]


def test_neighbor_attention_decodes_mask_states_with_the_adapted_head(adapted):
    _, _, folder = adapted
    model = create_model("neighbor-attention", backbone=str(folder), num_labels=3, **NA).eval()
    mlm = AutoModelForMaskedLM.from_pretrained(folder).eval()
    assert model.config.token_decoder == "mlm_head" and not any(p.requires_grad for p in model.lm_head.parameters())
    states = torch.randn(5, model.config.backbone_config.hidden_size)
    with torch.no_grad():
        torch.testing.assert_close(model.decode_mask_logits(states), mlm.cls(states), atol=1e-6, rtol=1e-5)
    row = {"sentence1": "A man walks dog 1 in the park.", "sentence2": "A woman reads book.", "label": 0}
    result = evaluate_expressiveness(model, load_tokenizer(str(folder)), [row], k=5)
    assert result["decoder"] == "mlm_head"
    plain = create_model(
        "neighbor-attention", backbone="tiny-bert", num_labels=3, token_decoder="input_embeddings", **NA
    )
    assert evaluate_expressiveness(plain, load_tokenizer("tiny-bert"), [row], k=5)["decoder"] == "input_embeddings"


def test_train_cli_accepts_the_adapted_folder(adapted, tmp_path):
    data, _, folder = adapted
    out = tmp_path / "run"
    flags = [
        "--model",
        "neighbor-attention",
        "--backbone",
        str(folder),
        "--dataset",
        "sick-e",
        "--data_dir",
        str(data),
    ]
    flags += ["--config_overrides", json.dumps(NA), "--output_dir", str(out), "--max_steps", "1", "--max_length", "48"]
    flags += ["--per_device_train_batch_size", "4", "--eval_strategy", "no", "--save_strategy", "no"]
    flags += ["--report_to", "none", "--disable_tqdm", "true", "--export", "false"]
    assert console_main(flags) == 0
    assert (out / "metrics.json").is_file()


def test_an_adaptation_on_cpu_gives_no_pin_memory_warning(tmp_path):
    data, backbone = _sick(tmp_path, 12), _backbone(tmp_path / "backbone")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(_args(data, backbone, tmp_path / "out", "--max_steps", "1")) == 0
    assert not [w for w in caught if "pin_memory" in str(w.message)], [str(w.message) for w in caught]


def test_existing_head_is_continued_with_the_flag(tmp_path):
    data, backbone = _sick(tmp_path, 12), _backbone(tmp_path / "mlm", with_head=True)
    assert main(_args(data, backbone, tmp_path / "out", "--max_steps", "1", "--allow_existing_head")) == 0
    assert json.loads((tmp_path / "out" / ADAPTATION_FILE).read_text())["mlm_head"] == "continued"
    info = BertModel.from_pretrained(tmp_path / "out", output_loading_info=True)[1]
    assert sorted(info["missing_keys"]) == ["pooler.dense.bias", "pooler.dense.weight"]  # the original had none


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_a_new_head_is_told_from_an_existing_one_on_every_architecture(name, tmp_path):
    """An encoder saved without an MLM head (as sentence-embedding models and ELECTRA discriminators are) gets a new
    head whatever its architecture names the head's modules; one saved as a masked LM is refused without the flag."""
    torch.manual_seed(0)
    AutoModel.from_config(tiny_backbone_config(name)).save_pretrained(tmp_path / "encoder")
    AutoModelForMaskedLM.from_config(tiny_backbone_config(name)).save_pretrained(tmp_path / "mlm")
    model, _, new_head = load_masked_lm(str(tmp_path / "encoder"), allow_existing_head=False)
    assert new_head and type(model).__name__.endswith("ForMaskedLM")
    assert not load_masked_lm(str(tmp_path / "mlm"), allow_existing_head=True)[2]
    with pytest.raises(ValueError, match="already has an MLM head"):
        load_masked_lm(str(tmp_path / "mlm"), allow_existing_head=False)


def test_an_electra_discriminator_is_adapted_with_a_new_head(tmp_path):
    """A headless ELECTRA encoder adapts end to end: recorded as a new head, saved in the masked-LM layout, and
    neighbor attention on the folder decodes with it."""
    torch.manual_seed(0)
    AutoModel.from_config(tiny_backbone_config("tiny-electra")).save_pretrained(tmp_path / "backbone")
    load_tokenizer("tiny-electra").save_pretrained(tmp_path / "backbone")
    data, out = _sick(tmp_path, 12), tmp_path / "adapted"
    assert main(_args(data, tmp_path / "backbone", out, "--max_steps", "1")) == 0
    assert json.loads((out / ADAPTATION_FILE).read_text())["mlm_head"] == "new"
    model = create_model("neighbor-attention", backbone=str(out), num_labels=3, **NA)
    assert model.config.token_decoder == "mlm_head"


def test_overwrite_replaces_a_non_empty_output_dir(tmp_path):
    data, backbone = _sick(tmp_path, 12), _backbone(tmp_path / "backbone")
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("x")
    assert main(_args(data, backbone, out, "--max_steps", "1", "--overwrite")) == 0
    assert not (out / "old.txt").exists() and (out / ADAPTATION_FILE).is_file()


def _few(tmp: Path) -> list[str]:
    return _args(_sick(tmp, MIN_SENTENCES // 2 - 1), _backbone(tmp / "b"), tmp / "out")


def _empty(tmp: Path) -> list[str]:
    return _args(_sick(tmp, 0), _backbone(tmp / "b"), tmp / "out")


def _with_head(tmp: Path) -> list[str]:
    return _args(_sick(tmp, 12), _backbone(tmp / "b", with_head=True), tmp / "out")


def _bad_tokenizer(tmp: Path) -> list[str]:
    tokenizer = tmp / "tok"
    load_tokenizer("tiny-roberta").save_pretrained(tokenizer)
    return _args(_sick(tmp, 12), _backbone(tmp / "b"), tmp / "out", "--tokenizer", str(tokenizer))


def _non_empty_output(tmp: Path) -> list[str]:
    (tmp / "out").mkdir()
    (tmp / "out" / "keep.txt").write_text("x")
    return _args(_sick(tmp, 12), _backbone(tmp / "b"), tmp / "out")


def _flag(flag: str, value: str):
    return lambda tmp: _args(_sick(tmp, 12), _backbone(tmp / "b"), tmp / "out", flag, value)


@pytest.mark.parametrize(
    "make, message",
    [
        (_few, rf"gives {MIN_SENTENCES - 2} distinct sentence\(s\); adaptation needs at least {MIN_SENTENCES}"),
        (_empty, r"split 'train' of 'sick-e' has no rows"),
        (_with_head, r"already has an MLM head; pass --allow_existing_head"),
        (_bad_tokenizer, r"--tokenizer .* has \d+ tokens but the backbone's input embeddings have 30522 rows"),
        (_non_empty_output, r"--output_dir .* exists and is not empty; pass --overwrite"),
        (_flag("--mlm_probability", "1.5"), r"`--mlm_probability` got an invalid value 1.5"),
        (_flag("--max_steps", "0"), r"`--max_steps` got an invalid value 0"),
        (_flag("--warmup_ratio", "1.5"), r"`--warmup_ratio` got an invalid value 1.5"),
        (_flag("--push_to_hub", "true"), r"`--push_to_hub` would upload the Trainer's temporary folder"),
        (_flag("--no_such_flag", "1"), r"--no_such_flag"),
        (_flag("--backbone", "tiny-bert"), r"backbone 'tiny-bert' is a random test variant"),
    ],
    ids=[
        "tiny-corpus",
        "empty-corpus",
        "existing-head",
        "tokenizer-vocab",
        "output-exists",
        "mlm-prob",
        "steps",
        "warmup",
        "push-to-hub",
        "unknown-flag",
        "random-backbone",
    ],
)
def test_bad_inputs_give_one_line_errors_and_write_nothing(tmp_path, capsys, make, message):
    argv = make(tmp_path)
    before = _snapshot(tmp_path)
    capsys.readouterr()  # drop what building the fixtures printed
    assert main(argv) == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("pairzoo.adapt_mlm: error: ")]
    assert re.search(message, err), err
    assert _snapshot(tmp_path) == before


def test_flags_keep_their_names_and_defaults_and_every_trainer_flag_is_read(tmp_path):
    out = str(tmp_path / "out")
    args, training = parse_args(["--dataset", "sick-e", "--output_dir", out])
    assert (args.backbone, args.tokenizer, args.max_train_samples) == ("minilm", None, None)
    assert (args.mlm_probability, args.max_length) == (0.15, 64) and not (args.allow_existing_head or args.overwrite)
    budget = ("num_train_epochs", "max_steps", "per_device_train_batch_size", "learning_rate", "warmup_steps", "seed")
    assert [getattr(training, name) for name in budget] == [3.0, -1, 32, 1e-4, 0.06, 0]
    assert training.output_dir == out and training.save_strategy == "no" and not training.remove_unused_columns
    _, training = parse_args(
        ["--dataset", "sick-e", "--output_dir", out, "--batch_size", "4", "--warmup_ratio", "0.1"]
        + ["--gradient_accumulation_steps", "2", "--weight_decay", "0.01"]
    )
    assert training.per_device_train_batch_size == 4 and training.warmup_steps == 0.1
    assert training.gradient_accumulation_steps == 2 and training.weight_decay == 0.01
    assert parse_args(["--dataset", "x", "--output_dir", out, "--warmup_steps", "10"])[1].warmup_steps == 10
    assert not (tmp_path / "out").exists()


def test_speed_benchmark_times_the_adaptation_steps():
    from benchmarks.speed_neighbor_attention import main as speed_main

    argv = ["--backbone", "tiny-bert", "--batch_size", "2", "--length", "24", "--repeats", "1", "--warmup", "0"]
    argv += ["--overrides", json.dumps({"neighbor_layers": [0]}), "--adapt_steps", "3", "--adapt_batch_size", "4"]
    result = speed_main([*argv, "--adapt_length", "12", "--adapt_corpus_sentences", "10"])
    adaptation = result["adaptation"]
    assert adaptation["steps"] == 3 and adaptation["length"] == 12
    assert adaptation["total_wall_seconds"] >= adaptation["median_step_wall_seconds"] > 0
    assert adaptation["estimated_epoch_wall_seconds"] == pytest.approx(3 * adaptation["median_step_wall_seconds"])
    assert "adaptation" not in speed_main([*argv, "--adapt_steps", "0"])
