"""The fleet harness: brokers and workers on hosts of their own (network namespaces)
on one machine, and the network faults of the chaos suite on them (docs/chaos.md)."""
