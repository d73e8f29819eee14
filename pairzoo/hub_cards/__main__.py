"""`python -m pairzoo.hub_cards push FOLDER ORG/NAME [--dry-run]`; `python -m pairzoo.hub_cards card FOLDER --results
DIR [--profile NAME] [--peers FILE] [--model-index {benchmark,export}]` re-renders an export's model card with the
benchmark results measured for its configuration and their comparison with the baseline arm (and the
sentence-transformers peer, when FILE exists)."""

import argparse
import sys
from pathlib import Path

from .push import push
from .results import PEERS_PATH, update_model_card


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pairzoo.hub_cards", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    push_parser = sub.add_parser("push", help="upload an export folder to the Hub")
    push_parser.add_argument("folder")
    push_parser.add_argument("repo_id")
    push_parser.add_argument("--dry-run", action="store_true", help="list what would be sent; works offline")
    push_parser.add_argument("--private", action="store_true")
    card_parser = sub.add_parser("card", help="re-render an export's model card with benchmark results")
    card_parser.add_argument("folder")
    card_parser.add_argument("--results", required=True, help="benchmark results folder (benchmarks/results/NAME)")
    card_parser.add_argument(
        "--base-model", default=None, help="backbone named in the card (default: the one the export recorded)"
    )
    card_parser.add_argument(
        "--profile", default=None, help="benchmark profile of the runs (default: the only one of this configuration)"
    )
    card_parser.add_argument(
        "--peers",
        type=Path,
        default=PEERS_PATH,
        help="sentence-transformers peer numbers for the baseline table (default ../shared/reference/"
        "peers_minilm.json beside the repository; a missing file leaves the peer column out)",
    )
    card_parser.add_argument(
        "--model-index",
        choices=("benchmark", "export"),
        default="benchmark",
        help="model-index numbers: the benchmark arm's means over seeds (default), or the dev numbers the export "
        "recorded for its own weights",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "card":
            results, _ = update_model_card(
                args.folder, args.results, args.base_model, args.profile, args.peers, args.model_index
            )
            print(f"{args.folder}/README.md: {len(results)} {args.model_index} result(s) in model-index")
            return 0
        push(args.folder, args.repo_id, dry_run=args.dry_run, private=args.private)
    except (OSError, ValueError) as err:  # a bad folder or argument, or the Hub unreachable (offline, network, auth)
        print(f"pairzoo.hub_cards: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
