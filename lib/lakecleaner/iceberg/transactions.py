"""A transaction whose view of the table's metadata costs what its changes cost (issue 80).

pyiceberg 0.12's `Transaction.table_metadata` applies every update the transaction staged to the
table's metadata and deep-copies the result, on every read, and a snapshot producer reads it about
fifty times in one commit: a commit's cost grew with the metadata, that is with every snapshot kept
for readers (at 10k keys and 100-record appends, 0.8 s a commit at commit 100 and 2.7 s at commit
400, nearly all of it copying). `open_transaction` opens one whose view is kept between reads and
moved by the updates staged since, applied one by one as pyiceberg applies them at commit
(`_apply_table_update`, each a shallow `model_copy` of frozen models), with no copy of the whole.
The commit itself is pyiceberg's, which works the metadata out again from the table and the
updates and checks it. This leans on pyiceberg 0.12's private update functions (the `iceberg`
extra pins `<0.13`); a pyiceberg that stops copying on every read makes the module unnecessary.
"""

from __future__ import annotations

from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableUpdate, _apply_table_update, _TableMetadataUpdateContext


class _View:
    """The table's metadata (`base`) with `applied` applied, and the context they were applied in."""

    def __init__(self, base: TableMetadata) -> None:
        self.base = base
        self.applied: tuple[TableUpdate, ...] = ()
        self.metadata = base
        self.context = _TableMetadataUpdateContext()

    def follows(self, base: TableMetadata, updates: tuple[TableUpdate, ...]) -> bool:
        """Whether `updates` on `base` extend what this view applied."""
        done = len(self.applied)
        return (
            base is self.base
            and len(updates) >= done
            and all(a is b for a, b in zip(updates[:done], self.applied, strict=True))
        )

    def moved(self, updates: tuple[TableUpdate, ...]) -> TableMetadata:
        """The view after `updates` (which `follows` it), applying only the new ones."""
        for update in updates[len(self.applied) :]:
            self.metadata = _apply_table_update(update, self.metadata, self.context)
        self.applied = updates
        return self.metadata


class _Viewed(Transaction):
    """A Transaction whose `table_metadata` is a kept view, moved by each update staged."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._view: _View | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        view = self._view
        if view is None or not view.follows(base, updates):
            view = self._view = _View(base)
        return view.moved(updates)


def open_transaction(table: Table) -> Transaction:
    """A transaction on `table`, as `table.transaction()` opens one, whose metadata costs what its
    changes cost (the module's docstring)."""
    return _Viewed(table)


__all__ = ["open_transaction"]
