"""RocksDB-backed keyed state for process functions: one table per state name,
``state.<name>``, keyed by the record key, holding JSON values."""

from __future__ import annotations

from typing import Any

from eddy.tables.codecs import decode_json, decode_utf8, encode_json, encode_utf8
from eddy.tables.store import PartitionTransaction, TableSpec


def state_table(name: str) -> TableSpec[str, Any]:
    """The table behind keyed state ``name``: key -> JSON value."""
    return TableSpec(f"state.{name}", encode_utf8, decode_utf8, encode_json, decode_json)


class StoredStateBackend:
    """:class:`eddy.eventtime.state.StateBackend` over a partition transaction."""

    def __init__(self, txn: PartitionTransaction) -> None:
        self._txn = txn
        # Table specs hash by identity (they key the transaction's change sets), so
        # each state name must always map to the same spec object.
        self._tables: dict[str, TableSpec[str, Any]] = {}

    def _table(self, name: str) -> TableSpec[str, Any]:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = state_table(name)
        return table

    def get_state(self, name: str, key: str) -> Any | None:
        return self._txn.get(self._table(name), key)

    def put_state(self, name: str, key: str, value: Any) -> None:
        self._txn.put(self._table(name), key, value)

    def delete_state(self, name: str, key: str) -> None:
        self._txn.delete(self._table(name), key)
