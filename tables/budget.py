"""RocksDB's memory in one process: one budget shared by all of its partitions.

At RocksDB's defaults every partition's database has memtables of its own (64 MB
each, two before writes stall) and a block cache of its own, so a process's
RocksDB memory grows with the partitions it is assigned and with how much it
writes between flushes: six partitions may hold ~800 MB of memtables. Here every
database a process opens (the ingest process's stores, the query process's
secondaries) shares one block cache and one write-buffer manager: whatever it
is assigned, RocksDB keeps about ``BLOCK_CACHE_BYTES + WRITE_BUFFERS_BYTES`` of
caches and memtables. Index and filter blocks of open SST files are outside
this budget; they grow with the data on disk, slowly (a few bytes per key).
"""

from __future__ import annotations

from functools import cache

from rocksdict import BlockBasedOptions, Cache, Options, WriteBufferManager

MIB = 2**20
BLOCK_CACHE_BYTES = 32 * MIB  # reads of committed state mostly hit Eddy's own caches
WRITE_BUFFERS_BYTES = 64 * MIB  # every memtable of the process together
# One memtable: a quarter of the budget, so a flush writes files of a useful size
# while another partition still has room.
MEMTABLE_BYTES = 16 * MIB


@cache
def _shared() -> tuple[Cache, WriteBufferManager]:
    """The process's cache and write-buffer manager, built on first use (after a
    fork, in the process that uses them) and kept for its life: RocksDB requires
    both to outlive every database that uses them."""
    return Cache(BLOCK_CACHE_BYTES), WriteBufferManager(WRITE_BUFFERS_BYTES, False)


def within_budget(options: Options) -> Options:
    """``options`` with the process's shared block cache and write-buffer budget."""
    block_cache, write_buffers = _shared()
    table = BlockBasedOptions()
    table.set_block_cache(block_cache)
    options.set_block_based_table_factory(table)
    options.set_write_buffer_manager(write_buffers)
    options.set_write_buffer_size(MEMTABLE_BYTES)
    return options
