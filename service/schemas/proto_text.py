"""The top-level messages of a Protobuf schema as a registry holds it, in order:
what a Protobuf record's first message index counts (Confluent's wire format).

A registry holds a ``.proto`` file's text, or (as Confluent's Python serializer
registers it) the file's descriptor, serialized and base64-encoded. A worker has
no protoc at run time, and needs no more than this: a record's indexes must
select, in its writer's schema, the message the topic is read as. In a text,
comments and string literals are skipped whole, so a brace or the word
``message`` inside them counts for nothing; the scan is linear in the text.
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.message import DecodeError as ProtobufDecodeError

# One token each: a string, a comment (an unterminated one runs to the end), a
# name, a brace, or any other character. Every alternative is linear.
_TOKEN = re.compile(
    r"""
    "(?:[^"\\\n]|\\.)*"? | '(?:[^'\\\n]|\\.)*'?
    | //[^\n]* | /\*.*?(?:\*/|\Z)
    | [A-Za-z_][A-Za-z0-9_.]*
    | [{}]
    | \S
    """,
    re.VERBOSE | re.DOTALL,
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def top_level_messages(text: str) -> tuple[str, list[str]]:
    """The file's package ("" if none) and its top-level message names, in order."""
    stripped = text.strip()
    if _BASE64.fullmatch(stripped):  # a .proto's text always has a brace or a semicolon
        try:
            file = FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
        except (binascii.Error, ProtobufDecodeError, ValueError):
            return "", []
        return file.package, [message.name for message in file.message_type]
    return _from_text(text)


def _from_text(text: str) -> tuple[str, list[str]]:
    package = ""
    messages: list[str] = []
    depth = 0
    previous = ""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] in "\"'/" and len(token) > 1:
            continue  # a string or a comment
        if token == "{":
            depth += 1
        elif token == "}":
            depth = max(depth - 1, 0)
        elif depth == 0 and previous in ("message", "package") and _NAME.fullmatch(token):
            if previous == "message":
                messages.append(token)
            else:
                package = token
        previous = token
    return package, messages
