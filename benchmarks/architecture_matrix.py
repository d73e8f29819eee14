"""Print the families x architectures matrix as a markdown table, for the release note.

    python benchmarks/architecture_matrix.py [--families csr-tri seaver] [--architectures tiny-bert tiny-mpnet]

Each cell runs the checks of tests/test_architectures.py (tests/architecture_cells.py): create -> forward through the
family's collator -> two training steps -> save/load -> pipeline -> export, then every export loaded by its Auto class
and pipeline in one fresh process without pairzoo. A cell shows ✓, `refused` (creation refuses the architecture, as
`EXPECTED_REFUSALS` says it must) or ✗ and the first stage that failed; the errors of failed cells follow the table.
Exits 1 when a cell failed. Runs offline on tiny random backbones, on one CPU thread. A bad flag prints one line,
`architecture_matrix.py: error: ...`, and exits with status 2 (`pairzoo.console.run_command`).
"""

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing pairzoo
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from architecture_cells import EXPECTED_REFUSALS, FAMILIES, markdown_table, refusal_problem, run_matrix, status  # noqa: E402

from pairzoo.backbones import TINY_ARCHITECTURES  # noqa: E402
from pairzoo.console import parse_flags, run_command  # noqa: E402

PROG = "architecture_matrix.py"


@dataclass
class MatrixArguments:
    """The flags of `benchmarks/architecture_matrix.py`."""

    families: list[str] = field(
        default_factory=lambda: list(FAMILIES),
        metadata={"choices": list(FAMILIES), "help": "the model families (rows) to check"},
    )
    architectures: list[str] = field(
        default_factory=lambda: list(TINY_ARCHITECTURES),
        metadata={"choices": list(TINY_ARCHITECTURES), "help": "the tiny backbone architectures (columns) to check"},
    )


class FailedCells(Exception):
    """Some cells of the matrix failed (they are listed above the message)."""


def main(argv: "list[str] | None" = None) -> int:
    """Run the cells of the flags `argv` and print the table and the failures; returns 1 when a cell failed, else 0."""
    args = parse_flags(MatrixArguments, argv, __doc__.splitlines()[0])
    start = time.perf_counter()
    results = run_matrix([(f, a) for f in args.families for a in args.architectures])
    print(markdown_table(results, args.families, args.architectures))
    failed = [(cell, result) for cell, result in results.items() if status(result).startswith("✗")]
    for cell, result in failed:
        refused = (result.family, result.architecture) in EXPECTED_REFUSALS
        print(f"- {cell}: " + (refusal_problem(result) if refused else f"{result.stage}: {result.error}"))
    print(f"\n{len(results)} cells, {len(failed)} failed, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 1 if failed else 0


def run(argv: "list[str]") -> None:
    """`main`, a failed cell raising `FailedCells` (exit status 1 through `run_command`)."""
    if main(argv):
        raise FailedCells("some cells failed (listed above).")


if __name__ == "__main__":
    sys.exit(run_command(PROG, run, failures=(FailedCells,)))
