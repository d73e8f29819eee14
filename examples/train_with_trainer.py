"""Fine-tune a pairzoo model with a plain `transformers.Trainer` on a `datasets.Dataset` of texts, then export it.

.venv/bin/python examples/train_with_trainer.py --backbone minilm --output_dir outputs/train_with_trainer
accelerate launch examples/train_with_trainer.py ...  (several GPUs or processes: docs/scaling.md)

The validation metrics and the export folder are printed (by the main process).
"""

import sys
from dataclasses import dataclass, field

from datasets import Dataset
from transformers import Trainer, TrainingArguments

from pairzoo import create_model, load_tokenizer
from pairzoo.console import parse_flags, run_command
from pairzoo.fileio import check_output_folder
from pairzoo.hub_cards import export_model
from pairzoo.training import compute_metrics_fn, make_collator, tokenize_dataset

PAIRS = [  # sentence1, sentence2, similarity 0-5
    ("A man plays a guitar.", "A man plays an instrument.", 4.2),
    ("A woman slices an onion.", "A man drives a car.", 0.4),
    ("A dog runs in a field.", "A dog is running on the grass.", 4.6),
    ("Children play football.", "A cat sleeps on a sofa.", 0.2),
    ("A chef cooks pasta.", "Someone is cooking noodles.", 3.8),
    ("The train leaves at noon.", "A plane lands at night.", 1.0),
    ("Two women sing on stage.", "Two women are singing.", 4.4),
    ("A boy reads a book.", "A girl rides a bicycle.", 0.8),
]


PROG = "examples/train_with_trainer.py"


@dataclass
class ExampleArguments:
    """The backbone to fine-tune and where to write the run."""

    backbone: str = field(default="minilm", metadata={"help": "minilm, tiny-bert, tiny-roberta, a folder or Hub id"})
    output_dir: str = field(
        default="outputs/train_with_trainer", metadata={"help": "the Trainer's folder; the model goes to its export/"}
    )


def parse_args(argv: "list[str]") -> ExampleArguments:
    """The flags of `argv`; an `--output_dir` that cannot be written is a ValueError naming it."""
    args = parse_flags(ExampleArguments, argv, __doc__)
    check_output_folder(args.output_dir, "--output_dir")
    return args


def run(argv: "list[str]") -> None:
    """Fine-tune a cross-encoder on `PAIRS`, evaluate it and export it to `<output_dir>/export`."""
    args = parse_args(argv)
    model = create_model("cross-encoder", backbone=args.backbone, label_min=0.0, label_max=5.0)
    tokenizer = load_tokenizer(args.backbone)
    texts = Dataset.from_dict(dict(zip(("sentence1", "sentence2", "label"), map(list, zip(*PAIRS)))))
    # exactly the model's forward inputs and `labels`: the Trainer's default remove_unused_columns=True keeps them
    data = tokenize_dataset(texts, model, tokenizer, max_length=64).train_test_split(test_size=3, seed=0)
    trainer = Trainer(
        model=model,
        args=TrainingArguments(args.output_dir, num_train_epochs=2, per_device_train_batch_size=2, report_to="none"),
        train_dataset=data["train"],
        eval_dataset=data["test"],
        data_collator=make_collator(model, tokenizer, max_length=64),  # pads the tokenized rows
        processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(model.config.num_labels),
    )
    trainer.train()
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():  # one writer when launched on several processes
        results = [{"dataset": "example pairs", "split": "validation", "metrics": metrics}]
        folder = export_model(
            model,
            tokenizer,
            f"{args.output_dir}/export",
            results,
            args.backbone,
            overwrite=True,
            task="pair-regression",
        )
        print(metrics, "export:", folder)


def main(argv: "list[str] | None" = None) -> int:
    """`run` as a command line on `argv` (default `sys.argv[1:]`): returns the exit status (an error in the input
    is one line and 2, `pairzoo.console.run_command`)."""
    return run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
