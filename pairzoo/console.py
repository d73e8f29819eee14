"""What every pairzoo command line shares: its parser, its error line, its `--traceback` flag and its logging.

- `OneLineErrorParser`: transformers' `HfArgumentParser` (flags declared as dataclass fields) whose errors (an
  unknown flag, a missing one, an unknown choice, a value of the wrong type) are a `ValueError` naming the flag, not
  argparse's usage text and exit. A field whose metadata has `"positional": True` is an optional positional
  argument (`nargs="?"`, its default when absent) instead of a `--flag`.
- `parse_flags(dataclass_types, argv, description)`: the dataclass instance(s) of `argv`, parsed by a
  `OneLineErrorParser` (help lists `--traceback` too); a string no flag takes is a ValueError.
- `check_at_least(args, minimum, *names)` and `json_object(text, name)`: checks of a flag's value (an integer's
  range, a JSON object), a ValueError naming the flag.
- `run_command(prog, main, argv)`: runs `main(argv)`; an error in the input (`USER_ERRORS`: what the checks raise)
  prints one line, `<prog>: error: ...`, and returns exit status 2; a run that failed (e.g. a non-finite loss, passed
  as `failures`) prints one line and returns 1; `--traceback` (`ConsoleArguments`, taken out of `argv` before `main`
  sees it) shows the Python traceback instead. Any other exception is a bug and keeps its traceback.
- Progress and info messages go through `transformers.utils.logging` (`logging.get_logger(__name__)` in each
  module); while a command runs they are shown on stderr, one bare line each (`console_logging`). Results meant to
  be read by programs (a final JSON line of metrics, a table) are printed to stdout by the tool itself.
"""

import argparse
import dataclasses
import json
import logging as std_logging
import sys
import types
import typing
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
    Help shows each flag's default and keeps the description's line breaks (`HelpFormatter`). A field whose
    metadata has `"positional": True` (a scalar type, with a default) is an optional positional argument."""

    def __init__(self, dataclass_types=None, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(dataclass_types, **kwargs)

    def error(self, message: str):
        raise ValueError(message)

    @staticmethod
    def _parse_dataclass_field(parser: argparse.ArgumentParser, field: dataclasses.Field) -> None:
        kwargs = dict(field.metadata)
        if not kwargs.pop("positional", False):
            HfArgumentParser._parse_dataclass_field(parser, field)
            return
        kind = field.type
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # `X | None`: X
            kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        parser.add_argument(field.name, nargs="?", type=kind, default=field.default, **kwargs)


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


def parse_flags(
    dataclass_types: "type | tuple[type, ...] | list[type]", argv: "list[str] | None", description: str
) -> typing.Any:
    """The instance of the dataclass `dataclass_types` (several: a tuple of instances, in their order) that
    `argv` (default `sys.argv[1:]`) gives, parsed by a `OneLineErrorParser` described by `description` whose help
    also lists `ConsoleArguments` (`run_command` takes those out of `argv`). Bad flags, and strings no flag takes
    ("unrecognized arguments: ..."), are a ValueError, raised before any dataclass checks its values."""
    several = isinstance(dataclass_types, (tuple, list))
    wanted = tuple(dataclass_types) if several else (dataclass_types,)
    parser = OneLineErrorParser((*wanted, ConsoleArguments), description=description)
    namespace, rest = parser.parse_known_args(args=sys.argv[1:] if argv is None else list(argv))
    if rest:
        raise ValueError(f"unrecognized arguments: {' '.join(rest)}")
    instances = tuple(
        kind(**{item.name: getattr(namespace, item.name) for item in dataclasses.fields(kind) if item.init})
        for kind in wanted
    )
    return instances if several else instances[0]


def check_at_least(args: object, minimum: int, *names: str) -> None:
    """Each flag `names` of `args` (a dataclass of flags) that is set (not None) must be at least `minimum` (a list
    flag: each of its values); else a ValueError naming it: `--name must be an integer >= minimum, got value.`"""
    for name in names:
        value = getattr(args, name)
        several = isinstance(value, list)
        for item in value if several else [value]:
            if item is not None and item < minimum:
                what = "integers" if several else "an integer"
                raise ValueError(f"--{name} must be {what} >= {minimum}, got {item}.")


def json_object(text: str, name: str) -> dict:
    """The JSON object `text` of the flag `--name` as a dict; anything else is a ValueError naming the flag."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--{name} is not valid JSON ({err.msg} at character {err.pos}): {text!r}.") from err
    if not isinstance(value, dict):
        raise ValueError(f"--{name} must be a JSON object, got {text!r}.")
    return value


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
    "check_at_least",
    "console_logging",
    "error_message",
    "json_object",
    "parse_flags",
    "run_command",
    "split_console_arguments",
]
