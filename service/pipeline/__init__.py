"""Pipeline definitions and the contract between pipelines and the runtime."""
