"""Finding secret material in EC2 user data: it is often base64, gzipped and a MIME
multipart document of several scripts (cloud-init's format), so the text is decoded first.
Only the kind of secret is reported, never the secret."""

import base64
import binascii
import email
import re
import zlib
from typing import Optional

from contract.names import REDACTED

_MAX_DECODED = 4 << 20
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----|-----BEGIN OpenVPN Static key")
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
_ASSIGNMENT = re.compile(
    r"^\s*(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>'[^']*'|\"[^\"]*\"|[^\s;]*)", re.M)
_SECRET_NAME = re.compile(r"(TOKEN|PASSWORD|PASSWD|SECRET|SECRET_KEY|PRIVATE_KEY|ACCESS_KEY|API_KEY)$",
                          re.I)
_YAML_CREDENTIAL = re.compile(
    r"^\s*-?\s*(?P<key>password|passwd|token|client-key-data|secret)\s*:\s*(?P<value>\S.*)$", re.M)
_GZIP_BASE64 = re.compile(r"H4sI[A-Za-z0-9+/=_-]{60,}")


def _unbase64(text: str) -> Optional[bytes]:
    compact = "".join(text.split())
    if len(compact) < 8 or len(compact) % 4:
        return None
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


def _gunzip(data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, _MAX_DECODED)
    except zlib.error:
        return data


def decode_user_data(value: str) -> list:
    """The texts user data carries: as given, base64- and gzip-decoded, and each part of a
    MIME multipart document (cloud-init's format for several scripts)."""
    texts = [value]
    data = _unbase64(value)
    if data is not None:
        texts.append(_gunzip(data).decode("utf-8", "replace"))
    for text in list(texts):
        if "multipart/" not in text[:4096]:
            continue
        for part in email.message_from_string(text).walk():
            payload = None if part.is_multipart() else part.get_payload(decode=True)
            if isinstance(payload, bytes):
                texts.append(_gunzip(payload).decode("utf-8", "replace"))
    return texts


def _literal(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return "" if value.startswith("$") else value


def secret_material(text: str, known_secrets=(), nested: bool = True) -> list:
    """What kinds of secret `text` holds (never the secrets themselves)."""
    found = []
    if _PRIVATE_KEY.search(text):
        found.append("a private key")
    if _AWS_KEY_ID.search(text):
        found.append("an AWS access key")
    for match in _ASSIGNMENT.finditer(text):
        if _SECRET_NAME.search(match["name"]) and _literal(match["value"]):
            found.append(f"a value for {match['name']}")
    for match in _YAML_CREDENTIAL.finditer(text):
        if _literal(match["value"]) not in ("", "''", '""', "null", "~"):
            found.append(f"a '{match['key']}' credential")
    if REDACTED in text:
        found.append("a value the preview redacted as secret")
    if any(len(secret) >= 8 and secret in text for secret in known_secrets):
        found.append("a secret of the stack")
    if nested:
        for blob in _GZIP_BASE64.findall(text):
            data = _unbase64(blob.replace("-", "+").replace("_", "/"))
            if data is not None:
                inner = _gunzip(data).decode("utf-8", "replace")
                found += [f"{what} (gzipped)" for what in
                          secret_material(inner, known_secrets, nested=False)]
    return sorted(set(found))
