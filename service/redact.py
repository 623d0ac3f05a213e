"""Credentials out of everything Eddy shows: logs, dead-letter headers, error
messages and bodies, ``eddy config``, reprs, metrics and the dashboard.

A credential reaches Eddy in a URL's user info (``https://user:pass@registry``,
``s3://KEY:SECRET@bucket/path``), in a parameter (``?password=...``,
``password='...'`` of a DSN, ``"token": "..."`` of a JSON document), in an
``Authorization`` header's value, or as a setting of its own (a ``SecretStr``).
The first ones are found by their shape in any text, so a message that quotes a
URL (an HTTP client's error, a settings repr) is safe however it was built. A
secret set apart from any URL is known only to the settings that hold it:
:func:`remember` adds it (and its URL-encoded forms) to what :func:`redact`
replaces, and :func:`remember_in` does the same for the passwords inside a URL,
which a library may print decoded and alone.

Redaction runs where text is shown (a log line, a dead letter, an error), never
per record on the hot path.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

MASK = "***"
# scheme://user:password@host: the user info, whatever the scheme (http, s3,
# postgresql...). With a ":", up to the last "@" of the URL, so a password pasted
# unencoded (an AWS secret key with "/", a password with "@") is masked whole; the
# price is that a URL with an "@" in its path shows less of itself, never more.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?P<info>[^/?#\s\"'<>@]*:[^\s\"'<>]*@|[^/?#\s\"'<>]+@)"
)
# A parameter whose name says it holds a credential: key=value (a URL's query, a
# libpq DSN, a JAAS line), or "key": "value" / 'key': 'value' (JSON, a dict repr).
# The name's ending is enough (sasl_password=, X-Amz-Signature=, session_token=).
_NAME = (
    r"(?:passw(?:or)?d|pwd|secret|token|(?:api|access|secret|private)_?key|"
    r"signature|sig|credentials?)"
)
# A value already masked (pydantic's SecretStr('**********'), ***) or None is left.
_PARAMETER = re.compile(
    rf"(?P<name>{_NAME}(?:=|[\"']\s*:\s*))"
    r"(?!SecretStr\(|\*|None\b)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^&\s\"'<>;,)\]}]+)",
    re.IGNORECASE,
)
# Cheap tests first: most text has no credential, and a regular expression over a
# log line costs tens of microseconds where "in" costs tenths.
_PARAMETER_WORDS = ("pass", "pwd", "secret", "token", "key", "sig", "credential")
_AUTHORIZATION_WORDS = ("Basic ", "Bearer ", "Token ")
# An Authorization header's value (a library's debug log of a request), named or
# alone: base64 or a token, so with a capital, a digit or one of +/= (not "Basic
# authentication"); a placeholder such as <EDDY_API_TOKEN> is left.
_AUTHORIZATION = re.compile(
    r"(?P<name>(?i:\b(?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?(?:(?:Basic|Bearer|Token) )?+))"
    r"(?![*<])[^\s\"',;]+"
    r"|(?P<scheme>\b(?:Basic|Bearer|Token) )"
    r"(?=[A-Za-z0-9+/=._~-]*[A-Z0-9+/=])[A-Za-z0-9+/=._~-]{6,}"
)
# Values shorter than this are not remembered: replacing every "eddy" in a message
# would make it unreadable, and a secret that short protects nothing.
_SHORTEST = 4
# Longest first, so a secret that contains another is replaced whole. A tuple,
# replaced whole under the lock: redact() may run in any thread, lock-free.
_known: tuple[str, ...] = ()
_lock = threading.Lock()


def remember(secrets: Iterable[str | None]) -> None:
    """Values :func:`redact` replaces wherever they appear (a password set apart
    from its URL can still show in a library's error message), with their
    URL-encoded and URL-decoded forms."""
    global _known
    forms = set()
    for secret in secrets:
        if secret is None:
            continue
        for form in (secret, quote(secret, safe=""), quote_plus(secret), unquote(secret)):
            forms.add(form)
        forms.add(unquote_plus(secret))
    forms = {f for f in forms if len(f) >= _SHORTEST}
    with _lock:
        if forms - set(_known):
            _known = tuple(sorted(set(_known) | forms, key=len, reverse=True))


def remember_in(text: str) -> None:
    """Remember the credentials inside ``text`` (a URL or a DSN): each user info's
    password and each credential parameter's value. A user name alone is not
    remembered: names such as ``eddy`` are everywhere in messages."""
    found = []
    for word in text.split():
        if "://" in word:
            try:
                found.append(urlsplit(word).password)
            except ValueError:  # not a URL after all (a bad port): nothing to take
                continue
    for match in _PARAMETER.finditer(text):
        found.append(match["value"].strip("\"'"))
    remember(found)


def forget_all() -> None:
    """Forget every remembered secret (tests that remember their own)."""
    global _known
    with _lock:
        _known = ()


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``***``."""
    if "@" in text and "://" in text:
        text = _USERINFO.sub(lambda m: m["scheme"] + MASK + "@", text)
    lower = text.lower()
    if ("=" in text or ":" in text) and any(w in lower for w in _PARAMETER_WORDS):
        text = _PARAMETER.sub(_masked_parameter, text)
    if any(w in text for w in _AUTHORIZATION_WORDS) or "authorization" in lower:
        text = _AUTHORIZATION.sub(lambda m: (m["name"] or m["scheme"]) + MASK, text)
    for secret in _known:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_all(value: Any) -> Any:
    """``value`` (a JSON-like document: dicts, lists, text) with every text in it
    redacted: an answer that quotes settings or errors (an endpoint, a root)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list | tuple):
        return [redact_all(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_all(v) for k, v in value.items()}
    return value


def _masked_parameter(match: re.Match[str]) -> str:
    value = match["value"]
    quote_mark = value[0] if value[0] in "\"'" else ""
    return f"{match['name']}{quote_mark}{MASK}{quote_mark}"


def redact_url(url: str) -> str:
    """A URL as it may be shown: its user info and credential parameters masked."""
    return redact(url)
