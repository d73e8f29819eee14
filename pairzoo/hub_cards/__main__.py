"""`python -m pairzoo.hub_cards push FOLDER ORG/NAME [--dry-run]`."""

import argparse
import sys

from .push import push


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pairzoo.hub_cards", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    push_parser = sub.add_parser("push", help="upload an export folder to the Hub")
    push_parser.add_argument("folder")
    push_parser.add_argument("repo_id")
    push_parser.add_argument("--dry-run", action="store_true", help="list what would be sent; works offline")
    push_parser.add_argument("--private", action="store_true")
    args = parser.parse_args(argv)
    try:
        push(args.folder, args.repo_id, dry_run=args.dry_run, private=args.private)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
