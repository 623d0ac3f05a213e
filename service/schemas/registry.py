"""A client of the Confluent Schema Registry API (Confluent's, or Apicurio's
``/apis/ccompat/v7``): schemas by id, registration, lookup. Synchronous, with
every answer cached for the life of the worker.

Why synchronous and blocking: decoding is synchronous and runs once per record,
and a schema id is immutable, so the registry is asked about each id once, at
its first record (one HTTP round trip, a millisecond or so on a local network),
and never again. Making decode asynchronous, or prefetching ids we cannot know
before we see them, would cost every record to save that one wait per id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from service.errors import EddyError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # AVRO, PROTOBUF or JSON
    text: str


class Registry(Protocol):
    """What a bound serde asks of a registry."""

    url: str

    def schema(self, schema_id: int) -> RegisteredSchema | None: ...
    def register(self, subject: str, text: str, schema_type: str) -> int: ...
    def lookup(self, subject: str, text: str, schema_type: str) -> int | None: ...


class RegistryUnavailable(EddyError):
    """The schema registry did not answer, or answered with an error that is not
    about the record. The record is retried as any failure of processing is (then
    dead-lettered after EDDY_MAX_RECORD_ATTEMPTS); check EDDY_SCHEMA_REGISTRY_URL
    and that the registry is up."""


class SchemaRejected(EddyError):
    """The registry refused a schema (incompatible with the subject's versions under
    its compatibility rule, or invalid): the message quotes the registry's reason."""


class SchemaRegistry:
    """Schemas by id, and an output's schema id by registration or lookup."""

    def __init__(
        self, url: str, auth: tuple[str, str] | None = None, timeout_ms: int = 10_000
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            auth=auth,
            timeout=timeout_ms / 1000,
            headers={"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE},
        )
        self._by_id: dict[int, RegisteredSchema | None] = {}

    def close(self) -> None:
        self._http.close()

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this id; None if the registry has none (cached too:
        an id the registry never issued is not issued later)."""
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        response = self._request("GET", f"/schemas/ids/{schema_id}")
        if response.status_code == 404:
            found = None
        else:
            self._check(response, f"schema id {schema_id}")
            body = response.json()
            found = RegisteredSchema(schema_id, body.get("schemaType", "AVRO"), body["schema"])
        self._by_id[schema_id] = found
        return found

    def register(self, subject: str, text: str, schema_type: str) -> int:
        """The id of ``text`` under ``subject``, registering it as a new version if
        it is not one yet (the registry checks its compatibility rule).

        Raises:
            SchemaRejected: incompatible with the subject's versions, or invalid.
        """
        response = self._request("POST", f"/subjects/{subject}/versions", _body(text, schema_type))
        if response.status_code in (409, 422) or _error_code(response) == 0:
            raise SchemaRejected(
                f"the schema registry refused the schema of subject {subject}: {_message(response)}"
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

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        try:
            return self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise RegistryUnavailable(
                f"schema registry {self.url} did not answer {method} {path}: {exc!r}"
            ) from None

    def _check(self, response: httpx.Response, what: str) -> None:
        if response.status_code >= 400:
            raise RegistryUnavailable(
                f"schema registry {self.url}, {what}: HTTP {response.status_code}: "
                f"{_message(response)}"
            )


def _body(text: str, schema_type: str) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":  # Confluent's default; older registries reject the field
        body["schemaType"] = schema_type
    return body


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.text))
    except ValueError:
        return response.text.strip() or f"HTTP {response.status_code}"


def _error_code(response: httpx.Response) -> int | None:
    """Apicurio answers an incompatible schema with error_code 0 (Confluent: 409)."""
    if response.status_code < 400:
        return None
    try:
        code = response.json().get("error_code")
    except ValueError:
        return None
    return code if isinstance(code, int) else None
