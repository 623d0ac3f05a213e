"""Fuzzing the decoders: ``python -m tools.fuzz`` (``make fuzz`` runs a million inputs).

Every serde a topic can have (JSON, Avro, Protobuf, JSON Schema, key serdes, a
whole source reading a key and a value) is fed inputs by atheris, libFuzzer's
coverage-guided engine for Python, or by a plain mutator where atheris is
missing, from seeds of good records and an in-memory registry that holds
adversarial writer schemas (recursive, zero-byte arrays, ReDoS patterns, remote
references, reference bombs). The invariant: each input decodes or raises a
DecodeError with a one-line reason, within 100 ms of CPU, and memory stays
bounded. A run prints the inputs run, the findings, the slowest input and the
growth of memory, and keeps each finding's input. Nothing here is imported by
the product.
"""
