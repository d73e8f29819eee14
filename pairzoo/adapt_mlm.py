"""`python -m pairzoo.adapt_mlm`: task-adaptive masked-language training of a backbone (Gururangan et al. 2020, TAPT).

Continues MLM training of an encoder on the sentences of one task's training split (both sentences of each pair,
each distinct sentence once; the validation and test splits are never read) and saves a backbone folder: the model
with its MLM head (its architecture's `AutoModelForMaskedLM` layout), the original backbone's pooler weights when it
has them (the masked-LM class has no pooler and would drop them; MLM training never touches them), the tokenizer, and
`adaptation.json` (what it was adapted on, with which budget, and the final training loss).

The bundled `minilm` is saved without an MLM head, as sentence-embedding checkpoints and ELECTRA discriminators are: a
new head is initialised (the architecture's own; for BERT a transform dense + LayerNorm, the decoder tied to the input
embeddings, zero output bias) and trained with the encoder. A backbone that already has an MLM head is refused unless
`--allow_existing_head` says to continue training that head.

Budget (defaults): 3 epochs (`--num_train_epochs`; `--max_steps N` > 0 overrides it), batch 32, learning rate 1e-4
with 6% linear warm-up (TAPT's values), `mlm_probability` 0.15 with BERT's 80/10/10 replacement
(`DataCollatorForLanguageModeling`), sentences truncated to 64 tokens, seed 0. Training runs through
`transformers.Trainer` (no checkpoints), and every `TrainingArguments` flag is a flag of this command
(`AdaptTrainingArguments`: `--batch_size` is `--per_device_train_batch_size`, `--warmup_ratio` is `--warmup_steps`).

Neighbor attention on the adapted backbone, two commands:

    python -m pairzoo.adapt_mlm --dataset sick-e --output_dir backbones/minilm-tapt-sick-e
    python -m pairzoo.train --model neighbor-attention --backbone backbones/minilm-tapt-sick-e --dataset sick-e ...

`create_model("neighbor-attention", backbone=folder)` (what the second command does) loads the adapted MLM head and
uses it as its [MASK] decoder (`token_decoder="mlm_head"`), which the expressiveness metric then reads.

Checked before anything is written, each a one-line error (`pairzoo.adapt_mlm: error: ...`, exit status 2): a
corpus of fewer than `MIN_SENTENCES` distinct sentences, a backbone with an MLM head without `--allow_existing_head`,
a tokenizer whose vocabulary size differs from the backbone's input embeddings (or that has no mask token), an
`--output_dir` that exists and is not empty without `--overwrite`, and invalid budget values. The folder is written
under a temporary name beside `--output_dir` and renamed into place at the end; a failed run leaves nothing.
"""

import copy
import json
import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AutoModel,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
    set_seed,
)
from transformers.utils import logging

from .backbones import DEFAULT_BACKBONE, resolve_backbone
from .console import ConsoleArguments, OneLineErrorParser, run_command
from .fileio import give_plain_modes, make_temporary_folder, write_text_atomic
from .modeling.modeling_neighbor_attention import masked_lm_from_pretrained
from .training.cli import unpin_memory_without_accelerator
from .training.data import has_training_split, load_dataset

logger = logging.get_logger(__name__)

PROG = "pairzoo.adapt_mlm"
MIN_SENTENCES = 16
ADAPTATION_FILE = "adaptation.json"


@dataclass
class AdaptArguments:
    """What is adapted, on which corpus, and how it is masked (the training budget is `AdaptTrainingArguments`)."""

    dataset: str = field(metadata={"help": "pairzoo data set whose train split is the corpus."})
    backbone: str = field(default=DEFAULT_BACKBONE, metadata={"help": "minilm, a local folder or a Hub id."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer folder or id (default: the backbone's)."})
    data_dir: str | None = field(default=None, metadata={"help": "Shared data folder (default ../shared/data)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use the first N training pairs."})
    mlm_probability: float = field(
        default=0.15, metadata={"help": "Share of tokens masked (BERT's 80/10/10 replacement)."}
    )
    max_length: int = field(default=64, metadata={"help": "Tokens per sentence (longer ones truncated)."})
    allow_existing_head: bool = field(
        default=False, metadata={"help": "Continue training a backbone's existing MLM head."}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace a non-empty --output_dir."})


@dataclass
class AdaptTrainingArguments(TrainingArguments):
    """`transformers.TrainingArguments` (every Trainer flag) with TAPT's budget as defaults, `--batch_size` and
    `--warmup_ratio` as the names of `--per_device_train_batch_size` and `--warmup_steps`, and `--output_dir` the
    adapted backbone's folder (required; the Trainer itself works in a temporary folder)."""

    output_dir: str = field(metadata={"help": "Folder of the adapted backbone."})
    per_device_train_batch_size: int = field(
        default=32, metadata={"aliases": ["--batch_size"], "help": "Training batch per device."}
    )
    learning_rate: float = field(default=1e-4, metadata={"help": "Peak learning rate (linear decay)."})
    warmup_steps: float = field(
        default=0.06,
        metadata={
            "aliases": ["--warmup_ratio"],
            "help": "Linear warm-up: a ratio of the total steps when < 1, else a whole number of steps.",
        },
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the new head's initialisation, the masking and the order."}
    )


# The Trainer's settings for this tool (each a flag that can change it): no checkpoints (it works in a temporary
# folder), no reports, logs or progress bar, and the corpus' `input_ids` kept for the collator.
TRAINER_DEFAULTS = {
    "save_strategy": "no",
    "report_to": "none",
    "logging_strategy": "no",
    "disable_tqdm": True,
    "remove_unused_columns": False,
}


def build_parser() -> OneLineErrorParser:
    """The argument parser of `python -m pairzoo.adapt_mlm`: the corpus and masking flags, then every
    `TrainingArguments` flag (`AdaptTrainingArguments`' defaults), then `--traceback`."""
    parser = OneLineErrorParser(
        (AdaptArguments, AdaptTrainingArguments, ConsoleArguments),
        prog=f"python -m {PROG}",
        description=__doc__.split("\n")[0],
    )
    parser.set_defaults(**TRAINER_DEFAULTS)
    return parser


def _check_values(values) -> None:
    """The value checks of the flags (`values`: the parsed flags, before `TrainingArguments` reads them)."""
    epochs, steps, batch = values.num_train_epochs, values.max_steps, values.per_device_train_batch_size
    warmup, samples = values.warmup_steps, values.max_train_samples
    checks = (
        ("--num_train_epochs", epochs, epochs > 0 and math.isfinite(epochs)),
        ("--max_steps", steps, steps == -1 or steps > 0),
        ("--batch_size", batch, batch >= 1),
        ("--learning_rate", values.learning_rate, values.learning_rate > 0 and math.isfinite(values.learning_rate)),
        ("--warmup_ratio", warmup, 0 <= warmup < 1 or (warmup >= 1 and float(warmup).is_integer())),
        ("--mlm_probability", values.mlm_probability, 0 < values.mlm_probability < 1),
        ("--max_length", values.max_length, values.max_length >= 8),
        ("--max_train_samples", samples, samples is None or samples > 0),
    )
    for flag, value, ok in checks:
        if not ok:
            raise ValueError(f"`{flag}` got an invalid value {value!r}; see --help for the allowed range.")
    if values.push_to_hub:
        raise ValueError(
            "`--push_to_hub` would upload the Trainer's temporary folder, not the adapted backbone; upload "
            "--output_dir once it is written."
        )


def parse_args(argv: "list[str] | None" = None) -> "tuple[AdaptArguments, AdaptTrainingArguments]":
    """Parse and check the flags (values only; the corpus, backbone and tokenizer are checked by `adapt`)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    _check_values(parser.parse_known_args(argv)[0])
    args, training_args, _ = parser.parse_args_into_dataclasses(args=argv)
    return args, training_args


def training_sentences(dataset: str, data_dir: "str | None" = None, max_train_samples: "int | None" = None) -> list:
    """Distinct sentences of `dataset`'s train split (both sentences of each pair, first occurrence order)."""
    if not has_training_split(dataset):
        raise ValueError(f"dataset {dataset!r} has no training split to adapt on.")
    rows = load_dataset(dataset, data_dir=data_dir, split="train")["train"]
    if max_train_samples is not None:
        rows = rows.select(range(min(max_train_samples, len(rows))))
    sentences = {}
    for row in rows:
        for column in ("sentence1", "sentence2"):
            text = row.get(column)
            if isinstance(text, str) and text.strip():
                sentences.setdefault(text.strip(), None)
    if len(sentences) < MIN_SENTENCES:
        raise ValueError(
            f"the train split of {dataset!r} gives {len(sentences)} distinct sentence(s); adaptation needs at least "
            f"{MIN_SENTENCES}."
        )
    return list(sentences)


def load_masked_lm(backbone: str, allow_existing_head: bool) -> "tuple[torch.nn.Module, str, bool]":
    """The backbone as a masked LM, its path, and whether its MLM head is new (initialised here)."""
    path = resolve_backbone(backbone)
    model, new_head = masked_lm_from_pretrained(path)
    if not new_head and not allow_existing_head:
        raise ValueError(
            f"backbone {backbone!r} already has an MLM head; pass --allow_existing_head to continue training it."
        )
    return model, path, new_head


def original_pooler(path: str, prefix: str) -> "dict[str, torch.Tensor]":
    """The pooler weights of the backbone at `path`, named as a masked LM with `base_model_prefix` `prefix` saves them
    (e.g. `bert.pooler.dense.weight`); empty when the checkpoint has no trained pooler."""
    base, info = AutoModel.from_pretrained(path, output_loading_info=True)
    pooler = getattr(base, "pooler", None)
    if pooler is None or any(key.startswith("pooler.") for key in info["missing_keys"]):
        return {}
    return {f"{prefix}.pooler.{name}": tensor for name, tensor in pooler.state_dict().items()}


def check_tokenizer(tokenizer, model: torch.nn.Module, name: str) -> None:
    """A ValueError unless `tokenizer` has a mask token and exactly as many tokens as the model's input embeddings."""
    rows = model.get_input_embeddings().num_embeddings
    if len(tokenizer) != rows:
        raise ValueError(
            f"--tokenizer {name!r} has {len(tokenizer)} tokens but the backbone's input embeddings have {rows} rows; "
            "use the backbone's own tokenizer."
        )
    if tokenizer.mask_token_id is None:
        raise ValueError(f"--tokenizer {name!r} has no mask token, which masked-language training needs.")


def check_output_dir(output_dir: Path, overwrite: bool) -> None:
    """A FileExistsError when `output_dir` is a file, or a non-empty folder without `overwrite`."""
    if output_dir.exists() and not output_dir.is_dir():
        raise FileExistsError(f"--output_dir {str(output_dir)!r} is a file.")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"--output_dir {str(output_dir)!r} exists and is not empty; pass --overwrite.")


def adapt(args: AdaptArguments, training_args: AdaptTrainingArguments) -> dict:
    """Run the adaptation described by `args` and `training_args` (from `parse_args`); returns what
    `adaptation.json` records."""
    output_dir = Path(training_args.output_dir)
    check_output_dir(output_dir, args.overwrite)
    sentences = training_sentences(args.dataset, args.data_dir, args.max_train_samples)
    set_seed(training_args.seed)  # the new head's initialisation
    model, path, new_head = load_masked_lm(args.backbone, args.allow_existing_head)
    tokenizer_name = args.tokenizer or path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    check_tokenizer(tokenizer, model, tokenizer_name)
    encoded = tokenizer(sentences, truncation=True, max_length=args.max_length)["input_ids"]
    corpus = [{"input_ids": ids} for ids in encoded]
    logger.info(
        "%s: adapting %s (%s MLM head) on %d sentences of %s",
        PROG,
        args.backbone,
        "new" if new_head else "existing",
        len(corpus),
        args.dataset,
    )
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temporary_folder(output_dir)
    try:
        with tempfile.TemporaryDirectory() as work:
            trainer_args = copy.copy(training_args)
            trainer_args.output_dir = work
            unpin_memory_without_accelerator(trainer_args)
            collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.mlm_probability)
            trainer = Trainer(model=model, args=trainer_args, train_dataset=corpus, data_collator=collator)
            result = trainer.train()
        if not math.isfinite(result.training_loss):
            raise FloatingPointError(f"adaptation diverged (training loss {result.training_loss}); nothing saved.")
        model.save_pretrained(tmp, state_dict={**model.state_dict(), **original_pooler(path, model.base_model_prefix)})
        tokenizer.save_pretrained(tmp)
        record = {
            "backbone": args.backbone,
            "backbone_path": str(path),
            "tokenizer": str(tokenizer_name),
            "mlm_head": "new" if new_head else "continued",
            "dataset": args.dataset,
            "split": "train",
            "max_train_samples": args.max_train_samples,
            "sentences": len(sentences),
            "budget": {
                "num_train_epochs": training_args.num_train_epochs,
                "max_steps": training_args.max_steps,
                "steps_done": result.global_step,
                "batch_size": training_args.per_device_train_batch_size,
                "learning_rate": training_args.learning_rate,
                "warmup_ratio": training_args.warmup_steps,
                "mlm_probability": args.mlm_probability,
                "max_length": args.max_length,
                "seed": training_args.seed,
            },
            "train_loss": result.training_loss,
        }
        write_text_atomic(tmp / ADAPTATION_FILE, json.dumps(record, indent=2) + "\n")
        give_plain_modes(tmp)
        if output_dir.exists():
            shutil.rmtree(output_dir)
        tmp.rename(output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def run(argv: "list[str]") -> dict:
    """Parse `argv`, adapt, and print the record (`adaptation.json`'s content) as JSON on stdout."""
    record = adapt(*parse_args(argv))
    print(json.dumps(record, indent=2))
    return record


def main(argv: "list[str] | None" = None) -> int:
    """Run the CLI on `argv`; an input error prints one line and returns 2 (`pairzoo.console.run_command`)."""
    return run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
