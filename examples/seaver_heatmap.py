"""Draw SEAVER's reweighting W_S next to the last-layer attention for one example (paper Figures 4 and 6).

    python -m examples.seaver_heatmap outputs/seaver/export --output /tmp/seaver.png \
        --sentence1 "A man in a red shirt rides a bike." --sentence2 "A woman walks a dog." --condition "The gender."

The export folder is what `python -m pairzoo.train --model seaver ...` writes (`<output_dir>/export`); it is loaded
with `trust_remote_code`. `--baseline_export` (a trained cross-encoder export) supplies the attention panel instead
of the SEAVER encoder's own attention. The PNG's path is printed.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoModel, AutoTokenizer

from pairzoo.console import parse_flags, run_command
from pairzoo.fileio import check_output_folder
from pairzoo.visualize import plot_seaver_reweighting, seaver_attention_maps

PROG = "examples.seaver_heatmap"


@dataclass
class HeatmapArguments:
    """The export folder (the positional `export_dir`), the example to draw and where to write the picture."""

    sentence1: str = field(metadata={"help": "first sentence"})
    condition: str = field(metadata={"help": "the condition"})
    output: str = field(metadata={"help": "PNG file to write"})
    export_dir: str | None = field(
        default=None, metadata={"positional": True, "help": "export folder of a trained SEAVER model"}
    )
    sentence2: str | None = field(
        default=None, metadata={"help": "second sentence; omit for conditional classification (e.g. ABSA)"}
    )
    baseline_export: str | None = field(default=None, metadata={"help": "export folder of a trained cross-encoder"})
    max_length: int | None = field(default=None, metadata={"help": "truncate the input to this many tokens"})


def parse_args(argv: "list[str]") -> "tuple[str, HeatmapArguments]":
    """The export folder and the flags of `argv`; a missing folder is a FileNotFoundError naming its argument, an
    `--output` that cannot be written a ValueError naming it."""
    args = parse_flags(HeatmapArguments, argv, __doc__.split("\n\n")[0])
    if args.export_dir is None:
        raise ValueError("export_dir: give the export folder of a trained SEAVER model (the first argument).")
    for name, folder in (("export_dir", args.export_dir), ("--baseline_export", args.baseline_export)):
        if folder is not None and not Path(folder).is_dir():
            raise FileNotFoundError(f"{name}: {folder!r} is not a folder (an export folder of `pairzoo.train`).")
    if Path(args.output).is_dir():
        raise ValueError(f"--output: {args.output!r} is a folder; give the PNG file to write.")
    check_output_folder(Path(args.output).parent, "--output")
    return args.export_dir, args


def run(argv: "list[str]") -> None:
    """Draw the maps of one example to `--output` and print the PNG's path."""
    export_dir, args = parse_args(argv)
    model = AutoModel.from_pretrained(export_dir, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    baseline = (
        AutoModel.from_pretrained(args.baseline_export, trust_remote_code=True) if args.baseline_export else None
    )
    maps = seaver_attention_maps(
        model, tokenizer, args.sentence1, args.sentence2, args.condition, baseline, max_length=args.max_length
    )
    title = f"condition: {args.condition}"
    print(plot_seaver_reweighting(maps, args.output, title=title))


def main(argv: "list[str] | None" = None) -> int:
    """`run` as a command line on `argv` (default `sys.argv[1:]`): returns the exit status (an error in the input
    is one line and 2, `pairzoo.console.run_command`)."""
    return run_command(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
