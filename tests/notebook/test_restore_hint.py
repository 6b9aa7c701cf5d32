"""The re-rendered panel's word on variables when a turn's code was inserted as cells (issue 35 item 4), as a table."""

from __future__ import annotations

import pytest

from nbagent.notebook import restart
from nbagent.notebook.restart import Claims, Plan, Turn

PY = (("toolu_1", "x = 42"), ("toolu_2", "y = x"))
INSERTED = Turn(1, 5, "make x", kernel="old", python_calls=PY, inserted_calls=frozenset({"toolu_1", "toolu_2"}))
PART = Turn(1, 5, "make x", kernel="old", python_calls=PY, inserted_calls=frozenset({"toolu_1"}))
FAILED_REST = Turn(
    1, 5, "make x", kernel="old", python_calls=PY, inserted_calls=frozenset({"toolu_1"}), failed_calls=frozenset({"toolu_2"})
)
NONE = Turn(1, 5, "make x", kernel="old", python_calls=PY)


@pytest.mark.parametrize(
    ("turn", "said"),
    [
        (INSERTED, f"not run again; {restart.VARIABLES_IN_CELLS}"),  # every call is in cells: no --restore
        (FAILED_REST, f"not run again; {restart.VARIABLES_IN_CELLS}"),  # the call not inserted raised: it made nothing
        (PART, f"not run again; {restart.VARIABLES_GONE}"),  # one call is in no cell: --restore gets its variables back
        (NONE, f"not run again; {restart.VARIABLES_GONE}"),
    ],
)
def test_a_turn_whose_code_is_in_cells_does_not_suggest_restore(turn: Turn, said: str) -> None:
    assert restart.after_recorded(Plan(Claims(), show=(turn,)), (turn,), "new") == said
    assert "--restore" not in restart.VARIABLES_IN_CELLS
