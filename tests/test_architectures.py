"""Every method family on every tiny encoder architecture (`pairzoo.backbones.TINY_ARCHITECTURES`).

Each cell (tests/architecture_cells.py): create -> forward through the family's collator -> two training steps with
gradients on everything that trains -> save/load round trip -> pairzoo's pipeline -> export, and the export loaded by
its card's Auto class and pipeline in a process where pairzoo cannot be imported, with the same outputs. The model
of a cell is built once, and all exports load in ONE fresh process for the selected cells (module fixture), so the
matrix stays fast; each cell's test asserts on its own result. A cell in `EXPECTED_REFUSALS` passes only when
creation refuses the architecture with a ValueError naming it.
"""

import pytest
from architecture_cells import (
    CONTROL_LOGITS,
    CONTROL_PIPELINE,
    EXPECTED_REFUSALS,
    FAMILIES,
    STAGES,
    CellResult,
    all_cells,
    cell_id,
    markdown_table,
    refusal_problem,
    run_matrix,
)

from pairzoo.backbones import TINY_ARCHITECTURES

CELLS = all_cells()


@pytest.fixture(scope="module")
def matrix(request, tmp_path_factory) -> "dict[str, CellResult]":
    """The results of the cells this session selected (all of them unless `-k` narrows it), with the controls."""
    selected = [
        (item.callspec.params["family"], item.callspec.params["architecture"])
        for item in request.session.items
        if item.module is request.module and "family" in getattr(getattr(item, "callspec", None), "params", {})
    ]
    return run_matrix(selected or CELLS[:1], tmp_path_factory.mktemp("matrix"), controls=True)


@pytest.mark.parametrize(("family", "architecture"), CELLS, ids=[cell_id(*cell) for cell in CELLS])
def test_cell(family: str, architecture: str, matrix: "dict[str, CellResult]") -> None:
    result = matrix[cell_id(family, architecture)]
    if (family, architecture) in EXPECTED_REFUSALS:
        problem = refusal_problem(result)
        assert problem is None, problem
    else:
        assert result.stage is None, f"{cell_id(family, architecture)}: stage {result.stage} failed: {result.error}"


def test_the_fresh_process_reports_outputs_that_differ(matrix: "dict[str, CellResult]") -> None:
    """Expectations off by 1e-3 in the logits, then in one pipeline score, fail at the stage that compares them."""
    assert CONTROL_LOGITS in matrix, "no selected cell reached the export, so the fresh process got no control job"
    logits, scores = matrix[CONTROL_LOGITS], matrix[CONTROL_PIPELINE]
    assert logits.stage == "fresh-auto-class" and "logits" in logits.error and "differ" in logits.error, logits
    assert scores.stage == "fresh-pipeline" and "pipeline outputs" in scores.error, scores


def test_the_matrix_covers_every_family_and_architecture() -> None:
    assert len(TINY_ARCHITECTURES) == 10 and len(set(TINY_ARCHITECTURES)) == 10
    assert {family.model for family in FAMILIES.values()} == {
        "cross-encoder",
        "seaver",
        "csr",
        "comateformer",
        "siamese-matcher",
        "neighbor-attention",
    }
    assert {"csr-tri", "csr-bi", "csr-reference", "csr-no-router"} <= set(FAMILIES)
    assert set(EXPECTED_REFUSALS) <= set(CELLS)
    assert len(CELLS) == len(FAMILIES) * len(TINY_ARCHITECTURES)


def test_markdown_table_marks_passed_refused_and_failed_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    family, (bert, roberta, deberta, mpnet) = "csr-tri", ("tiny-bert", "tiny-roberta", "tiny-deberta-v2", "tiny-mpnet")
    monkeypatch.setitem(EXPECTED_REFUSALS, (family, deberta), "cannot run")
    monkeypatch.setitem(EXPECTED_REFUSALS, (family, mpnet), "cannot run")
    results = {
        cell_id(family, bert): CellResult(family, bert),
        cell_id(family, roberta): CellResult(family, roberta, "train", "AssertionError: no gradient"),
        cell_id(family, deberta): CellResult(family, deberta, "create", "", "it cannot run on 'deberta-v2'"),
        cell_id(family, mpnet): CellResult(family, mpnet, "create", "", "it cannot run on this backbone"),
    }
    table = markdown_table(results, [family], [bert, roberta, deberta, mpnet, "tiny-albert"]).splitlines()
    assert table == [
        "| family | bert | roberta | deberta-v2 | mpnet | albert |",
        "|---|---|---|---|---|---|",
        f"| {family} | ✓ | ✗ train | refused | ✗ refusal |  |",  # the mpnet refusal does not name 'mpnet'
    ]
    assert "train" in STAGES
