"""`python -m pairzoo.train --model cross-encoder --backbone minilm --dataset synthetic --output_dir out ...`

An error in the input (a bad flag, value, data file or checkpoint, an `--output_dir` another run is using: the
`ValueError`, `FileNotFoundError`, `FileExistsError` or `KeyError` the checks raise) prints one line,
`pairzoo.train: error: ...`, and exits with status 2; `--traceback` shows the Python traceback instead. A
`NonFiniteLossError` (training diverged) prints one line and exits with status 1. Any other exception is a bug and
keeps its traceback (`pairzoo.console.run_command`).
"""

import sys

from .console import run_command
from .training.cli import NonFiniteLossError, main

PROG = "pairzoo.train"


def console_main(argv: "list[str] | None" = None) -> int:
    """Run the CLI on `argv` (default `sys.argv[1:]`); returns the exit status."""
    return run_command(PROG, main, argv, failures=(NonFiniteLossError,))


if __name__ == "__main__":
    sys.exit(console_main())
