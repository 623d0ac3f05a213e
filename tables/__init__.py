"""Keyed RocksDB state: codecs, partition stores, and the stores behind the
event-time core. The only package that imports rocksdict."""
