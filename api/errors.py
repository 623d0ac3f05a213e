"""Every error as a JSON problem body (RFC 9457); never a stack trace, never a
credential: a message may quote a URL with its password (a snapshot root, a peer),
so every text of a body goes through service/redact.py."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from eddy.app.queries import NoDataYetError, PartitionUnavailableError, UnknownKeyError
from eddy.app.web import Problem
from eddy.redact import redact, redact_all

log = logging.getLogger(__name__)
PROBLEM = "application/problem+json"


class BadRequestError(Exception):
    """A request the API understood but cannot serve as asked (400)."""


_WHY = {
    400: "A parameter is inconsistent (a range, a limit above the maximum)",
    401: "EDDY_API_TOKEN is set and the request has no (or the wrong) bearer token",
    404: "No such agent, view or key",
    409: "The key is known but has no result yet",
    422: "A parameter is malformed",
    500: "A bug in Eddy or in an agent's route; the worker's log has the details",
    503: (
        "The key's partition is restoring or moving, or its owner cannot be reached;"
        " retry after Retry-After seconds"
    ),
}
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": why} for status, why in _WHY.items()
}


def problem_media_type(schema: dict[str, Any]) -> dict[str, Any]:
    """FastAPI puts a response model under application/json; an error answers
    application/problem+json, so the schema says that."""
    ref = "#/components/schemas/Problem"
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                body = content.get("application/json")
                if body is not None and body.get("schema", {}).get("$ref") == ref:
                    content[PROBLEM] = content.pop("application/json")
    return schema


def problem(
    status: int,
    detail: str,
    request: Request,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": redact(detail),
        "instance": redact(request.url.path),
        **redact_all(extra),
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem(exc.status_code, detail, request, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        detail = f"{'.'.join(first['loc'][1:]) or 'request'}: {first['msg']}"
        return problem(422, detail, request, errors=errors)

    @app.exception_handler(BadRequestError)
    async def bad_request(request: Request, exc: BadRequestError) -> JSONResponse:
        return problem(400, str(exc), request)

    @app.exception_handler(UnknownKeyError)
    async def unknown(request: Request, exc: UnknownKeyError) -> JSONResponse:
        return problem(404, str(exc), request)

    @app.exception_handler(NoDataYetError)
    async def not_yet(request: Request, exc: NoDataYetError) -> JSONResponse:
        return problem(409, str(exc), request)

    @app.exception_handler(PartitionUnavailableError)
    async def unavailable(request: Request, exc: PartitionUnavailableError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)}
        return problem(503, str(exc), request, headers=headers, partition=exc.partition)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error serving %s", request.url.path)
        return problem(500, "internal error; the worker log has the details", request)
