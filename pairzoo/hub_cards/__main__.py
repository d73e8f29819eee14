"""`python -m pairzoo.hub_cards push FOLDER ORG/NAME [--dry-run]`; `python -m pairzoo.hub_cards card FOLDER --results
DIR [--profile NAME] [--peers FILE] [--model-index {benchmark,export}]` re-renders an export's model card with the
benchmark results measured for its configuration and their comparison with the baseline arm (and the
sentence-transformers peer, when FILE exists).

A bad folder or argument, or the Hub unreachable (offline, network, auth), prints one line,
`pairzoo.hub_cards: error: ...`, and exits with status 2 (`pairzoo.console.run_command`)."""

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..console import ConsoleArguments, OneLineErrorParser, run_command
from .push import push
from .results import PEERS_PATH, update_model_card

PROG = "pairzoo.hub_cards"


@dataclass
class PushArguments:
    """The flags of `push FOLDER ORG/NAME`."""

    dry_run: bool = field(default=False, metadata={"help": "list what would be sent; works offline"})
    private: bool = field(default=False, metadata={"help": "create the Hub repo as a private one"})


@dataclass
class CardArguments:
    """The flags of `card FOLDER`."""

    results: str = field(metadata={"help": "benchmark results folder (benchmarks/results/NAME)"})
    base_model: str | None = field(
        default=None, metadata={"help": "backbone named in the card (None: the one the export recorded)"}
    )
    profile: str | None = field(
        default=None, metadata={"help": "benchmark profile of the runs (None: the only one of this configuration)"}
    )
    peers: Path = field(
        default=PEERS_PATH,
        metadata={
            "help": "sentence-transformers peer numbers for the baseline table (a missing file leaves the peer "
            "column out)"
        },
    )
    model_index: Literal["benchmark", "export"] = field(
        default="benchmark",
        metadata={
            "help": "model-index numbers: the benchmark arm's means over seeds, or the dev numbers the export "
            "recorded for its own weights"
        },
    )


def build_parsers() -> "tuple[OneLineErrorParser, dict[str, OneLineErrorParser]]":
    """The parser of `python -m pairzoo.hub_cards`, and the parser of each command by name."""
    parser = OneLineErrorParser(prog=f"python -m {PROG}", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    push_parser = commands.add_parser(
        "push", dataclass_types=(PushArguments, ConsoleArguments), help="upload an export folder to the Hub"
    )
    push_parser.add_argument("folder", help="the export folder")
    push_parser.add_argument("repo_id", help="the Hub repo, ORG/NAME")
    card_parser = commands.add_parser(
        "card",
        dataclass_types=(CardArguments, ConsoleArguments),
        help="re-render an export's model card with benchmark results",
    )
    card_parser.add_argument("folder", help="the export folder")
    return parser, {"push": push_parser, "card": card_parser}


def run(argv: "list[str]") -> None:
    """Parse `argv` and run its command."""
    parser, commands = build_parsers()
    namespace = parser.parse_args(argv)
    args, _ = commands[namespace.command].parse_dict(vars(namespace), allow_extra_keys=True)
    if namespace.command == "card":
        results, _ = update_model_card(
            namespace.folder, args.results, args.base_model, args.profile, args.peers, args.model_index
        )
        print(f"{namespace.folder}/README.md: {len(results)} {args.model_index} result(s) in model-index")
        return
    push(namespace.folder, namespace.repo_id, dry_run=args.dry_run, private=args.private)


def main(argv: "list[str] | None" = None) -> int:
    """Run the command line on `argv`; returns the exit status."""
    return run_command(PROG, run, argv, errors=(OSError, ValueError))


if __name__ == "__main__":
    sys.exit(main())
