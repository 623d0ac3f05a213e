"""JSON Schema validators that a schema cannot turn against the worker.

The jsonschema library, as it comes, runs a schema's ``pattern`` with Python's
backtracking ``re`` (``^(a+)+$`` took 18 s on a 49-byte record) and fetches any
URL a ``$ref`` names, per record, with no timeout. Here:

- every ``pattern`` and ``patternProperties`` (and ``additionalProperties``,
  which matches the same patterns) runs on RE2, in time linear in the text; a
  pattern RE2 cannot compile refuses the schema;
- a ``$ref`` resolves only inside the schema (and JSON Schema's own
  metaschemas): a reference to anything else refuses the schema, and nothing is
  ever fetched, even by a ``$ref`` reached in a way the check did not see;
- subschemas nest at most ``max_depth`` levels; a schema whose references
  multiply the work on one value (each level's ``anyOf`` referring twice to the
  next: 2^30 evaluations of a few bytes) or loop on it is refused, and a
  record's validation may take a bounded number of steps through ``$ref`` and
  the applicators (``anyOf`` and the like), in proportion to its size;
- ``uniqueItems`` compares items in linear time (jsonschema compares objects
  pairwise: a megabyte of ``{}`` would take hours).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import urldefrag, urljoin

import re2  # type: ignore[import-untyped]
import referencing
import referencing.jsonschema
from jsonschema import exceptions, validators
from jsonschema.exceptions import ValidationError
from jsonschema_specifications import REGISTRY as METASCHEMAS  # type: ignore[import-untyped]

# A record's validation may take this many steps, and this many more per byte
# (a model's schema takes about one step per 20 bytes of its records).
STEPS_FIRST = 200
STEPS_PER_BYTE = 1
# The most subschemas one value may be checked against through $ref and the
# applicators (a model's schema: a few; a oneOf of 50 event types: about 100).
MAX_EVALUATIONS = 256
# Keywords that apply subschemas to the value itself (not to its items or fields).
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
# Keywords that apply subschemas to the same value: where work can multiply.
_COUNTED = (
    *("$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if"),
    *("dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems"),
)
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class Refused(Exception):
    """Why a schema is refused."""


class OverBudget(Exception):
    """A record took more validation steps than its size allows."""


class Budget:
    """The steps a record's validation may still take (reset per record)."""

    def __init__(self) -> None:
        self.left = STEPS_FIRST
        self.allowed = STEPS_FIRST

    def reset(self, size_bytes: int) -> None:
        self.left = self.allowed = STEPS_FIRST + STEPS_PER_BYTE * size_bytes

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise OverBudget(
                f"validating it took more than {self.allowed} steps through $ref, anyOf and "
                f"the like ({STEPS_FIRST} + {STEPS_PER_BYTE} per byte): the schema's references "
                "multiply the work"
            )


def bounded_validator(
    schema: Any, max_depth: int, references: tuple[str, ...] = ()
) -> tuple[Any, Budget]:
    """A validator of ``schema`` and the budget its validations spend.

    Raises:
        Refused: the schema is invalid, refers outside itself, has a pattern RE2
            cannot run, or nests deeper than ``max_depth``.
    """
    if not isinstance(schema, dict | bool):
        raise Refused(f"not a JSON Schema: {type(schema).__name__}")
    document = schema if isinstance(schema, dict) else {}
    dialect = document.get("$schema")
    specification: referencing.Specification[Any] = referencing.jsonschema.DRAFT202012
    if dialect is not None:
        try:
            specification = referencing.jsonschema.specification_with(str(dialect))
        except referencing.jsonschema.UnknownDialect:
            raise Refused(f"$schema {dialect!r:.100} is no JSON Schema draft Eddy knows") from None
    bases = _check(document, specification, max_depth, references)
    _Evaluations(document, specification, bases, max_depth).count(document, 0)
    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        base.check_schema(schema)  # type: ignore[arg-type]
    except exceptions.SchemaError as exc:
        raise Refused(f"not a valid JSON Schema: {exc.message:.300}") from None
    except RecursionError:
        raise Refused("nested too deeply to check") from None
    budget = Budget()
    cls = validators.extend(base, _keywords(base, budget))  # type: ignore[no-untyped-call]
    registry: referencing.jsonschema.SchemaRegistry = referencing.Registry(
        retrieve=_never_fetch  # type: ignore[call-arg]
    )
    return cls(schema, registry=registry), budget


def _check(
    schema: dict[str, Any],
    specification: referencing.Specification[Any],
    max_depth: int,
    references: tuple[str, ...],
) -> dict[int, str]:
    """Walk the subschemas: depth, patterns, and where each reference points.
    Returns each subschema's base URI (by its ``id``), for :class:`_Evaluations`."""
    known = {""}
    bases: dict[int, str] = {}
    refs: list[tuple[str, str]] = []
    unevaluated = patterned = False
    stack: list[tuple[Any, str, int]] = [(schema, "", 0)]
    while stack:
        node, base, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if depth > max_depth:
            raise Refused(
                f"subschemas nested deeper than {max_depth} levels (EDDY_SCHEMA_REGISTRY_MAX_DEPTH)"
            )
        found_id = specification.id_of(node)
        if isinstance(found_id, str):
            base = urljoin(base, found_id)
            known.add(urldefrag(base).url)
        bases[id(node)] = base
        refs += [(base, node[k]) for k in _REF_KEYWORDS if isinstance(node.get(k), str)]
        for pattern in _patterns(node):
            _regex_or_refuse(pattern)
        patterned = patterned or isinstance(node.get("patternProperties"), dict)
        unevaluated = unevaluated or "unevaluatedProperties" in node
        stack += [(sub, base, depth + 1) for sub in specification.subresources_of(node)]
    if unevaluated and patterned:
        # jsonschema matches patternProperties with Python's re while it finds
        # the properties unevaluatedProperties applies to.
        raise Refused("unevaluatedProperties next to patternProperties is not supported")
    for base, ref in refs:
        target = urldefrag(urljoin(base, ref)).url
        if target not in known and target not in METASCHEMAS:
            named = f"; the registry's references ({', '.join(references)})" if references else ""
            raise Refused(
                f"$ref {ref!r} points outside the schema{named}: Eddy resolves references "
                "only inside the schema and never fetches a URL"
            )
    return bases


class _Evaluations:
    """How many subschemas one value is checked against, at most: through the
    applicators and references that stay on the value (those that go into its
    items or fields move on to other values, so they cannot multiply the work)."""

    def __init__(
        self,
        schema: dict[str, Any],
        specification: referencing.Specification[Any],
        bases: dict[int, str],
        max_depth: int,
    ) -> None:
        resource = specification.create_resource(schema)
        self.registry: referencing.Registry[Any] = referencing.Registry().with_resource(
            "", resource
        )
        root_id = specification.id_of(schema)
        if isinstance(root_id, str):
            self.registry = self.registry.with_resource(urldefrag(root_id).url, resource)
        self.registry = self.registry.crawl()
        self.bases = bases
        self.max_depth = max_depth
        self.counted: dict[int, int] = {}
        self.open: set[int] = set()

    def count(self, node: Any, depth: int) -> int:
        if not isinstance(node, dict):
            return 1
        key = id(node)
        if key in self.counted:
            return self.counted[key]
        if key in self.open:
            raise Refused(
                "its references come back to the same value without going into it: endless"
            )
        if depth > self.max_depth:
            raise Refused(
                f"references and applicators chained deeper than {self.max_depth} levels "
                "(EDDY_SCHEMA_REGISTRY_MAX_DEPTH)"
            )
        self.open.add(key)
        total = 1 + sum(self.count(sub, depth + 1) for sub in self._in_place(node))
        self.open.discard(key)
        if total > MAX_EVALUATIONS:
            raise Refused(
                f"one value would be checked against more than {MAX_EVALUATIONS} subschemas: "
                "its references and anyOf/oneOf/allOf branches multiply the work"
            )
        self.counted[key] = total
        return total

    def _in_place(self, node: dict[str, Any]) -> Iterator[Any]:
        for keyword in _IN_PLACE_LISTS:
            if isinstance(node.get(keyword), list):
                yield from node[keyword]
        for keyword in _IN_PLACE_ONE:
            if keyword in node:
                yield node[keyword]
        for keyword in _IN_PLACE_MAPS:
            if isinstance(node.get(keyword), dict):
                yield from (v for v in node[keyword].values() if isinstance(v, dict))
        for keyword in _REF_KEYWORDS:
            ref = node.get(keyword)
            if isinstance(ref, str):
                yield self._target(node, ref)

    def _target(self, node: dict[str, Any], ref: str) -> Any:
        resolver = self.registry.resolver(base_uri=self.bases.get(id(node), ""))
        try:
            return resolver.lookup(ref).contents
        except referencing.exceptions.Unresolvable:
            return None  # a $dynamicRef's anchor, found at run time: counted by the budget


def _patterns(node: dict[str, Any]) -> Iterator[str]:
    if isinstance(node.get("pattern"), str):
        yield node["pattern"]
    if isinstance(node.get("patternProperties"), dict):
        yield from (p for p in node["patternProperties"] if isinstance(p, str))


_QUIET = re2.Options()
_QUIET.log_errors = False  # a refused pattern is reported as the schema's reason, not logged


@lru_cache(maxsize=4_096)
def _regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (raises re2.error if RE2 cannot run it)."""
    return re2.compile(pattern, _QUIET)


def _regex_or_refuse(pattern: str) -> Any:
    try:
        return _regex(pattern)
    except re2.error as exc:
        raise Refused(
            f"pattern {pattern!r:.100} is not one RE2 runs ({_text(exc)}): Eddy runs patterns in "
            "linear time, without backreferences or lookaround"
        ) from None


def _text(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def _never_fetch(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


def _keywords(base: Any, budget: Budget) -> dict[str, Callable[..., Any]]:
    replaced: dict[str, Callable[..., Any]] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    keywords = {k: f for k, f in replaced.items() if k in base.VALIDATORS}
    for keyword in _COUNTED:
        if keyword in base.VALIDATORS:
            keywords[keyword] = _counted(base.VALIDATORS[keyword], budget)
    return keywords


def _counted(keyword: Callable[..., Any], budget: Budget) -> Callable[..., Any]:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget.spend()
        return keyword(validator, value, instance, schema)

    return counted


# The keywords below are jsonschema's own, matching with RE2 instead of re.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{_shown(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _regex(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_regex(p) for p in schema.get("patternProperties", {})]
    extras = {
        key
        for key in instance
        if key not in properties and not any(p.search(key) for p in patterns)
    }
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        listed = ", ".join(repr(each) for each in sorted(extras, key=str)[:5])
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _shown(text: str) -> str:
    """A string as a reason quotes it: whole if short, else its start and length."""
    if len(text) <= 60:
        return repr(text)
    return f"{text[:40]!r}... ({len(text)} characters)"


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if unique and validator.is_type(instance, "array"):
        seen = {_canonical(item) for item in instance}
        if len(seen) != len(instance):
            yield ValidationError("has non-unique elements")


def _canonical(value: Any) -> Any:
    """A hashable form of a JSON value, equal where JSON Schema says equal: 1 and
    1.0 are, true and 1 are not, objects regardless of their keys' order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return value
