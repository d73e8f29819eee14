"""Build a pairzoo model on the bundled MiniLM, score conditional pairs, and export it as a Hub folder.

.venv/bin/python examples/quickstart.py --output_dir outputs/quickstart

The head is untrained (fine-tune with `python -m pairzoo.train`): the scores only show the pipeline's output format.
"""

import sys
from dataclasses import dataclass, field

from transformers import pipeline

import pairzoo
from pairzoo.console import parse_flags, run_command
from pairzoo.fileio import check_output_folder
from pairzoo.hub_cards import export_model

PROG = "examples/quickstart.py"


@dataclass
class QuickstartArguments:
    """Which model to build and where to export it."""

    model: str = field(
        default="cross-encoder", metadata={"choices": pairzoo.list_models(), "help": "pairzoo model to build"}
    )
    output_dir: str = field(
        default="outputs/quickstart", metadata={"help": "Hub folder to export to (replaced if it exists)"}
    )


def parse_args(argv: "list[str]") -> QuickstartArguments:
    """The flags of `argv`; an `--output_dir` that cannot be written is a ValueError naming it."""
    args = parse_flags(QuickstartArguments, argv, __doc__)
    check_output_folder(args.output_dir, "--output_dir")
    return args


def run(argv: "list[str]") -> None:
    """Score two conditions of one pair (printed, one line each) and export the model (its folder is printed)."""
    args = parse_args(argv)
    model = pairzoo.create_model(args.model, backbone="minilm").eval()
    tokenizer = pairzoo.load_tokenizer("minilm")
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    pair = {
        "sentence1": "Two women in red jackets walk in a park.",
        "sentence2": "Two men in blue coats run on a beach.",
    }
    for condition in ("The number of people.", "The colour of the clothing."):
        print(condition, scorer({**pair, "condition": condition}))
    print("export:", export_model(model, tokenizer, args.output_dir, overwrite=True))


def main(argv: "list[str] | None" = None) -> int:
    """`run` as a command line on `argv` (default `sys.argv[1:]`): returns the exit status (an error in the input
    is one line and 2, `pairzoo.console.run_command`)."""
    return run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
