"""State snapshots: consistent cuts of the state, exported to Parquet (docs/snapshots.md)."""
