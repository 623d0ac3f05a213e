"""A client of the Confluent Schema Registry API (Confluent's, or Apicurio's
``/apis/ccompat/v7``): schemas by id with the subjects they are versions of,
registration, lookup.

Why lookups run off the event loop: the loop that decodes records also runs the
Kafka consumer's heartbeats, and a record can carry any schema id, so a flood of
ids nobody issued would otherwise cost one blocking request each. Before a task
decodes a batch it asks for the ids the batch's headers name and nobody knows
yet (:meth:`SchemaRegistry.prefetch`): they are fetched concurrently in threads,
waited for at most ``timeout_ms``, and the synchronous decode then finds them in
the cache. An id is immutable, so a schema stays cached (least recently used
dropped first, past ``cache_size``); "no such id" is kept only for
``not_found_ttl_ms``, as an id may be issued after a record names it.

A registry that does not answer is not the record's fault: the record fails and
is retried as any processing failure is (:class:`RegistryUnavailable`), and the
client backs off (no request for a while, doubling) instead of asking again per
record.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import httpx

from eddy.errors import EddyError
from eddy.redact import redact, redact_url

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# Requests in flight at once: enough for a batch of new ids to take a few round
# trips, few enough that a flood of ids is not a flood of requests.
FETCH_THREADS = 8
# Ids the registry said it lacks, kept at once: a batch holds at most 10,000
# records, so one batch's unknown ids always fit until its records are decoded.
NOT_FOUND_ENTRIES = 100_000
BACKOFF_FIRST_S = 0.1


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # AVRO, PROTOBUF or JSON
    text: str
    # The subjects it is a version of (a record's schema must be one of its topic's).
    subjects: frozenset[str] = frozenset()
    # The names of the registry's references (schemas it imports), which Eddy does not resolve.
    references: tuple[str, ...] = ()


class Registry(Protocol):
    """What a bound serde asks of a registry."""

    url: str

    def schema(self, schema_id: int) -> RegisteredSchema | None: ...
    def register(self, subject: str, text: str, schema_type: str) -> int: ...
    def lookup(self, subject: str, text: str, schema_type: str) -> int | None: ...

    def known(self, schema_id: int) -> bool:
        """Whether :meth:`schema` answers about this id without a request."""
        ...

    def forget(self, schema_id: int) -> None:
        """Ask about this id again (a schema may become a version of more subjects)."""
        ...

    async def prefetch(self, schema_ids: Collection[int]) -> None:
        """Fetch the ids not known yet, off the event loop, waiting a bounded time."""
        ...


class RegistryUnavailable(EddyError):
    """The schema registry did not answer, or answered with an error that is not
    about the record. The record is retried as any failure of processing is (then
    dead-lettered after EDDY_MAX_RECORD_ATTEMPTS); check EDDY_SCHEMA_REGISTRY_URL
    and that the registry is up."""


class SchemaRejected(EddyError):
    """The registry refused a schema (incompatible with the subject's versions under
    its compatibility rule, or invalid): the message quotes the registry's reason."""


class SchemaRegistry:
    """Schemas by id, and an output's schema id by registration or lookup.

    The caches are read and written only by the thread that runs the event loop
    (fetch threads return their answers to it), so they need no lock.
    """

    def __init__(
        self,
        url: str,
        auth: tuple[str, str] | None = None,
        timeout_ms: int = 10_000,
        *,
        cache_size: int = 1_000,
        not_found_ttl_ms: int = 30_000,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Args:
        clock: seconds, for the "not found" expiry and the back-off (tests pass a fake).
        transport: how requests are sent (tests pass a fake registry's).
        """
        self.url = url.rstrip("/")
        self.shown_url = redact_url(self.url)
        self._http = httpx.Client(
            base_url=self.url,
            auth=auth,
            timeout=timeout_ms / 1000,
            headers={"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE},
            transport=transport,
        )
        self._timeout_ms = timeout_ms
        self._cache_size = cache_size
        self._not_found_s = not_found_ttl_ms / 1000
        self._clock = clock
        self._found: OrderedDict[int, RegisteredSchema] = OrderedDict()
        self._missing: dict[int, float] = {}  # id -> until when (clock) it is unknown
        self._inflight: dict[int, asyncio.Future[RegisteredSchema | None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._down_until = 0.0
        self._down_reason = ""
        self._backoff_s = BACKOFF_FIRST_S

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    # -- schemas by id ------------------------------------------------------------------

    def known(self, schema_id: int) -> bool:
        if schema_id in self._found:
            return True
        until = self._missing.get(schema_id)
        return until is not None and until > self._clock()

    def forget(self, schema_id: int) -> None:
        self._found.pop(schema_id, None)
        self._missing.pop(schema_id, None)

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this id; None if the registry has none.

        An id neither fetched nor being fetched (a caller that does not prefetch)
        is asked for now, blocking.

        Raises:
            RegistryUnavailable: the registry did not answer (now, or recently: the
                client is backing off), or is still being asked about this id.
        """
        found = self._found.get(schema_id)
        if found is not None:
            self._found.move_to_end(schema_id)
            return found
        now = self._clock()
        until = self._missing.get(schema_id)
        if until is not None:
            if until > now:
                return None
            del self._missing[schema_id]
        if schema_id in self._inflight:
            raise RegistryUnavailable(
                f"schema registry {self.shown_url} did not answer about schema id {schema_id} "
                f"within {self._timeout_ms} ms (EDDY_SCHEMA_REGISTRY_TIMEOUT_MS); still asking"
            )
        self._raise_if_backing_off(now)
        try:
            outcome = self._fetch(schema_id)
        except RegistryUnavailable as exc:
            self._failed(str(exc))
            raise
        self._keep(schema_id, outcome)
        return outcome

    async def prefetch(self, schema_ids: Collection[int]) -> None:
        """Fetch the ids of ``schema_ids`` not known yet, concurrently in threads,
        waiting at most ``timeout_ms``; an id still in flight then stays in flight
        (its answer is kept when it comes). Never raises: what failed is said by
        :meth:`schema` when the record is decoded."""
        now = self._clock()
        wanted = [i for i in schema_ids if not self.known(i)]
        if not wanted or self._down_until > now:
            return
        loop = asyncio.get_running_loop()
        waiting = []
        for schema_id in wanted:
            future = self._inflight.get(schema_id)
            if future is None:
                future = loop.run_in_executor(self._executor(), self._fetch, schema_id)
                future.add_done_callback(partial(self._settle, schema_id))
                self._inflight[schema_id] = future
            waiting.append(future)
        await asyncio.wait(waiting, timeout=self._timeout_ms / 1000)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="schema-registry")
        return self._pool

    def _settle(self, schema_id: int, future: asyncio.Future[RegisteredSchema | None]) -> None:
        """A fetch thread's answer, kept (in the event loop's thread)."""
        self._inflight.pop(schema_id, None)
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            self._keep(schema_id, future.result())
        else:
            self._failed(redact(str(error)))

    def _keep(self, schema_id: int, outcome: RegisteredSchema | None) -> None:
        self._backoff_s = BACKOFF_FIRST_S
        if outcome is None:
            if len(self._missing) >= NOT_FOUND_ENTRIES:
                del self._missing[next(iter(self._missing))]
            self._missing[schema_id] = self._clock() + self._not_found_s
            return
        self._found[schema_id] = outcome
        self._found.move_to_end(schema_id)
        while len(self._found) > self._cache_size:
            self._found.popitem(last=False)

    def _failed(self, reason: str) -> None:
        self._down_reason = reason
        self._down_until = self._clock() + self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, max(self._timeout_ms / 1000, BACKOFF_FIRST_S))

    def _raise_if_backing_off(self, now: float) -> None:
        if self._down_until > now:
            wait_ms = round((self._down_until - now) * 1000)
            raise RegistryUnavailable(f"{self._down_reason}; asking again in {wait_ms} ms")

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        """One id's schema and subjects from the registry (runs in a fetch thread)."""
        response = self._request("GET", f"/schemas/ids/{schema_id}")
        if response.status_code == 404:
            return None
        what = f"schema id {schema_id}"
        self._check(response, what)
        body = self._json(response, what)
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryUnavailable(
                f"schema registry {self.shown_url}, {what}: the answer holds no schema"
            )
        versions = self._request("GET", f"/schemas/ids/{schema_id}/versions")
        subjects: frozenset[str] = frozenset()
        if versions.status_code != 404:  # 404: a version of no subject (all deleted)
            self._check(versions, f"the subjects of {what}")
            listed = self._json(versions, f"the subjects of {what}")
            if isinstance(listed, list):
                subjects = frozenset(
                    v["subject"] for v in listed if isinstance(v, dict) and "subject" in v
                )
        references = body.get("references") or ()
        return RegisteredSchema(
            schema_id,
            str(body.get("schemaType", "AVRO")),
            body["schema"],
            subjects,
            tuple(str(r.get("name")) for r in references if isinstance(r, dict)),
        )

    # -- outputs ------------------------------------------------------------------------

    def register(self, subject: str, text: str, schema_type: str) -> int:
        """The id of ``text`` under ``subject``, registering it as a new version if
        it is not one yet (the registry checks its compatibility rule).

        Raises:
            SchemaRejected: incompatible with the subject's versions, or invalid.
        """
        response = self._request("POST", f"/subjects/{subject}/versions", _body(text, schema_type))
        if response.status_code in (409, 422) or _error_code(response) == 0:
            raise SchemaRejected(
                redact(
                    f"the schema registry refused the schema of subject {subject}: "
                    f"{_message(response)}"
                )
            )
        self._check(response, f"registering subject {subject}")
        return int(response.json()["id"])

    def lookup(self, subject: str, text: str, schema_type: str) -> int | None:
        """The id of ``text`` if it is a version of ``subject``; None if not."""
        response = self._request("POST", f"/subjects/{subject}", _body(text, schema_type))
        if response.status_code == 404:
            return None
        self._check(response, f"looking up subject {subject}")
        return int(response.json()["id"])

    # -- HTTP ---------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        try:
            return self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise RegistryUnavailable(
                redact(f"schema registry {self.shown_url} did not answer {method} {path}: {exc!r}")
            ) from None

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            raise RegistryUnavailable(
                redact(
                    f"schema registry {self.shown_url}, {what}: HTTP {response.status_code}: "
                    f"{_message(response)}"
                )
            )

    def _json(self, response: httpx.Response, what: str) -> Any:
        try:
            return response.json()
        except (ValueError, RecursionError):
            raise RegistryUnavailable(
                f"schema registry {self.shown_url}, {what}: the answer is not JSON"
            ) from None


def _body(text: str, schema_type: str) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":  # Confluent's default; older registries reject the field
        body["schemaType"] = schema_type
    return body


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.text))
    except (ValueError, AttributeError, RecursionError):
        return response.text.strip()[:500] or f"HTTP {response.status_code}"


def _error_code(response: httpx.Response) -> int | None:
    """Apicurio answers an incompatible schema with error_code 0 (Confluent: 409)."""
    if response.status_code < 400:
        return None
    try:
        code = response.json().get("error_code")
    except (ValueError, AttributeError, RecursionError):
        return None
    return code if isinstance(code, int) else None
