"""What every pairzoo command line shares: its parser, its error line, its `--traceback` flag and its logging.

- `OneLineErrorParser`: transformers' `HfArgumentParser` (flags declared as dataclass fields) whose errors (an
  unknown flag, a missing one, an unknown choice, a value of the wrong type) are a `ValueError` naming the flag, not
  argparse's usage text and exit.
- `run_command(prog, main, argv)`: runs `main(argv)`; an error in the input (`USER_ERRORS`: what the checks raise)
  prints one line, `<prog>: error: ...`, and returns exit status 2; a run that failed (e.g. a non-finite loss, passed
  as `failures`) prints one line and returns 1; `--traceback` (`ConsoleArguments`, taken out of `argv` before `main`
  sees it) shows the Python traceback instead. Any other exception is a bug and keeps its traceback.
- Progress and info messages go through `transformers.utils.logging` (`logging.get_logger(__name__)` in each
  module); while a command runs they are shown on stderr, one bare line each (`console_logging`). Results meant to
  be read by programs (a final JSON line of metrics, a table) are printed to stdout by the tool itself.
"""

import argparse
import logging as std_logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from transformers import HfArgumentParser
from transformers.utils import logging

USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, KeyError)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after each flag's help; the description and the epilog keep their line breaks."""


class OneLineErrorParser(HfArgumentParser):
    """`HfArgumentParser` whose errors (an unknown flag or choice, a missing flag, a value of the wrong type) are a
    `ValueError` naming the flag, which `run_command` prints as one line, not argparse's usage text and an exit.
    Help shows each flag's default and keeps the description's line breaks (`HelpFormatter`)."""

    def __init__(self, dataclass_types=None, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(dataclass_types, **kwargs)

    def error(self, message: str):
        raise ValueError(message)


@dataclass
class ConsoleArguments:
    """The flag every pairzoo command line has (`run_command` reads it)."""

    traceback: bool = field(
        default=False, metadata={"help": "On an error in the input, show the Python traceback, not one line."}
    )


def split_console_arguments(argv: "list[str]") -> "tuple[ConsoleArguments, list[str]]":
    """`ConsoleArguments` given in `argv`, and `argv` without them (in their order)."""
    parser = OneLineErrorParser(ConsoleArguments, add_help=False, allow_abbrev=False)
    console, rest = parser.parse_args_into_dataclasses(
        args=argv, return_remaining_strings=True, look_for_args_file=False
    )
    return console, rest


def error_message(err: BaseException) -> str:
    """`err`'s message on one line (a missing key's message is its first argument: str(KeyError("x")) is "'x'")."""
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return " ".join(text.split())


class _StderrHandler(std_logging.StreamHandler):
    """Writes each record to the `sys.stderr` of the moment (a replaced stream, e.g. a test's capture, is followed)."""

    def __init__(self) -> None:
        std_logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr


@contextmanager
def console_logging() -> Iterator[None]:
    """Show pairzoo's messages from info level up while the block runs: on stderr, one bare line each (as
    transformers prints its own), unless the program configured logging (a handler on the root logger), whose
    handlers then show them. Restores the previous state at the end."""
    logger = logging.get_logger("pairzoo")
    level = logger.level
    handler = None if std_logging.getLogger().handlers else _StderrHandler()
    logger.setLevel(logging.INFO)
    if handler is not None:
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


def run_command(
    prog: str,
    main: "Callable[[list[str]], object]",
    argv: "list[str] | None" = None,
    *,
    errors: "tuple[type[BaseException], ...]" = USER_ERRORS,
    failures: "tuple[type[BaseException], ...]" = (),
) -> int:
    """Run the command line `prog` (e.g. `pairzoo.train`): `main` on `argv` (default `sys.argv[1:]`) without
    `--traceback`; returns the exit status. `errors` (bad input) print `<prog>: error: <message>` and give 2,
    `failures` (a run that failed) the same line and 1; with `--traceback` they are raised instead."""
    argv = sys.argv[1:] if argv is None else list(argv)
    console = ConsoleArguments()
    try:
        console, argv = split_console_arguments(argv)
        with console_logging():
            main(argv)
    except (*failures, *errors) as err:
        if console.traceback:
            raise
        print(f"{prog}: error: {error_message(err)}", file=sys.stderr)
        return 1 if isinstance(err, failures) else 2
    return 0


__all__ = [
    "USER_ERRORS",
    "ConsoleArguments",
    "HelpFormatter",
    "OneLineErrorParser",
    "console_logging",
    "error_message",
    "run_command",
    "split_console_arguments",
]
