"""`python -m pairzoo.train_kg --model csr --backbone minilm --config_overrides '{"architecture": "tri"}' ...`

An error in the input (a bad flag, value or data file) prints one line, `pairzoo.train_kg: error: ...`, and exits
with status 2; a non-finite loss prints one line and exits with status 1 (see `pairzoo.train`).
"""

import sys

from .train import USER_ERRORS, _message
from .training.cli import NonFiniteLossError
from .training.kg import parse_args, run_kg

PROG = "pairzoo.train_kg"


def console_main(argv: "list[str] | None" = None) -> int:
    """Run the KG trainer on `argv` (default `sys.argv[1:]`); returns the exit status."""
    try:
        run_kg(parse_args(argv))
    except (NonFiniteLossError, *USER_ERRORS) as err:
        print(f"{PROG}: error: {_message(err)}", file=sys.stderr)
        return 1 if isinstance(err, NonFiniteLossError) else 2
    return 0


if __name__ == "__main__":
    sys.exit(console_main())
