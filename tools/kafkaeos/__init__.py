"""Apache Kafka's own exactly-once system test, with Eddy as the application.

Kafka Streams' ``StreamsEosTest`` (in the ``kafka-streams`` test jar) drives and
verifies it: ``run`` produces to ``data``; the application under test reads
``data`` in consumer group ``EosTest`` and writes ``echo``, ``min``, ``sum``,
``repartition``, ``max`` and ``cnt``; ``verify`` and ``verify-complex`` check
them record by record. :mod:`tools.kafkaeos.app` is the Eddy app,
:mod:`tools.kafkaeos.run` the run with its bounces (docs/chaos.md).
"""
