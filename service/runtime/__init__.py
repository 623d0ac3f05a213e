"""Eddy's runtime: consumer loop, per-partition tasks, transactions, restore."""
