"""Topics whose records are written with a schema registry: Avro, Protobuf and
JSON Schema in the Confluent wire format (a 0 byte, the schema's id as four
big-endian bytes, the payload; Protobuf adds the message's indexes).

A topic declares one next to its model (``Topic("readings", Reading,
serde=Avro(SCHEMA))``); building the app binds it to the registry named by
``EDDY_SCHEMA_REGISTRY_URL`` (:mod:`eddy.schemas.settings`), under the
subject ``<topic>-value`` (``<topic>-key`` for ``key_serde``). The agent sees
the model either way. A record is read only with a schema of its topic's
subject that is safe to decode with (:mod:`eddy.schemas.base`); a task
fetches a batch's new schema ids off the event loop before decoding it
(:mod:`eddy.schemas.registry`). docs/formats.md is the user's guide.
"""
