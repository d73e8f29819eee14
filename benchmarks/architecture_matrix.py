"""Print the families x architectures matrix as a markdown table, for the release note.

    python benchmarks/architecture_matrix.py [--families csr-tri seaver] [--architectures tiny-bert tiny-mpnet]

Each cell runs the checks of tests/test_architectures.py (tests/architecture_cells.py): create -> forward through the
family's collator -> two training steps -> save/load -> pipeline -> export, then every export loaded by its Auto class
and pipeline in one fresh process without pairzoo. A cell shows ✓, `refused` (creation refuses the architecture, as
`EXPECTED_REFUSALS` says it must) or ✗ and the first stage that failed; the errors of failed cells follow the table.
Exits 1 when a cell failed. Runs offline on tiny random backbones, on one CPU thread.
"""

import argparse
import os
import sys
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from architecture_cells import EXPECTED_REFUSALS, FAMILIES, markdown_table, refusal_problem, run_matrix, status  # noqa: E402

from pairzoo.backbones import TINY_ARCHITECTURES  # noqa: E402


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument(
        "--architectures", nargs="+", choices=list(TINY_ARCHITECTURES), default=list(TINY_ARCHITECTURES)
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = run_matrix([(f, a) for f in args.families for a in args.architectures])
    print(markdown_table(results, args.families, args.architectures))
    failed = [(cell, result) for cell, result in results.items() if status(result).startswith("✗")]
    for cell, result in failed:
        refused = (result.family, result.architecture) in EXPECTED_REFUSALS
        print(f"- {cell}: " + (refusal_problem(result) if refused else f"{result.stage}: {result.error}"))
    print(f"\n{len(results)} cells, {len(failed)} failed, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
