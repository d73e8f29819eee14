"""`python -m pairzoo.train_kg --model csr --backbone minilm --config_overrides '{"architecture": "tri"}' ...`

An error in the input (a bad flag, value or data file) prints one line, `pairzoo.train_kg: error: ...`, and exits
with status 2; a non-finite loss prints one line and exits with status 1; `--traceback` shows the Python traceback
instead (`pairzoo.console.run_command`, as `pairzoo.train`).
"""

import sys

from .console import run_command
from .training.cli import NonFiniteLossError
from .training.kg import main

PROG = "pairzoo.train_kg"


def console_main(argv: "list[str] | None" = None) -> int:
    """Run the KG trainer on `argv` (default `sys.argv[1:]`); returns the exit status."""
    return run_command(PROG, main, argv, failures=(NonFiniteLossError,))


if __name__ == "__main__":
    sys.exit(console_main())
