"""A campaign as people and best.yaml read it: rows and tables of its subjects, and when compiling pays for itself."""

from __future__ import annotations

from autotune.measure.report._breakeven import break_even, break_even_text
from autotune.measure.report._tables import confirmation_cells, confirmation_rows, confirmation_table, table

__all__ = ["break_even", "break_even_text", "confirmation_cells", "confirmation_rows", "confirmation_table", "table"]
