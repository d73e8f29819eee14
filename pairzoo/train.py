"""`python -m pairzoo.train --model cross-encoder --backbone minilm --dataset synthetic --output_dir out ...`

An error in the input (a bad flag, value, data file or checkpoint, an `--output_dir` another run is using: the
`ValueError`, `FileNotFoundError`, `FileExistsError` or `KeyError` the checks raise) prints one line,
`pairzoo.train: error: ...`, and exits with status 2; `--traceback` shows the Python traceback instead. A
`NonFiniteLossError` (training diverged) prints one line and exits with status 1. Any other exception is a bug and
keeps its traceback.
"""

import sys

from .training.cli import NonFiniteLossError, parse_args, run

USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, KeyError)
PROG = "pairzoo.train"


def _message(err: BaseException) -> str:
    # str(KeyError("x")) is "'x'": a missing key's message is its first argument
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def console_main(argv: "list[str] | None" = None) -> int:
    """Run the CLI on `argv` (default `sys.argv[1:]`); returns the exit status."""
    show_traceback = False
    try:
        model_args, data_args, training_args, show_traceback = parse_args(argv)
        run(model_args, data_args, training_args)
    except (NonFiniteLossError, *USER_ERRORS) as err:
        if show_traceback:
            raise
        print(f"{PROG}: error: {_message(err)}", file=sys.stderr)
        return 1 if isinstance(err, NonFiniteLossError) else 2
    return 0


if __name__ == "__main__":
    sys.exit(console_main())
