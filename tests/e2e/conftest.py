"""End-to-end fixtures: the real broker; tests start worker processes themselves."""

from tests.support.broker import kafka_broker  # noqa: F401  (autouse, session scope)
from tests.support.postgres import fresh_schema, postgres_dsn  # noqa: F401  (PostgreSQL tests)
