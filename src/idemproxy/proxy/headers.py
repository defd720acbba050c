"""Header hygiene in both directions (RFC 9110 section 7.6.1) and what a record may keep."""

from __future__ import annotations

from multidict import CIMultiDict, MultiMapping

from idemproxy.encodings import IDENTITY, decodable_only

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Recomputed by the side that sends the bytes; passing them on would lie about the framing.
_FRAMING = frozenset({"content-length", "host"})
IDEM_PREFIX = "idem-"

# Headers a replay may repeat. Anything else (cookies, auth challenges, rate-limit state that is
# stale by replay time) is dropped before a response is stored.
STORED_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-language",
        "content-disposition",
        "location",
        "etag",
        "last-modified",
        "link",
        "request-id",
        "x-request-id",
        "idempotency-key",
        "original-request",
        "stripe-version",
        "openai-model",
        "openai-organization",
        "openai-processing-ms",
        "openai-version",
        "anthropic-organization-id",
    }
)


def nominated_by_connection(headers: MultiMapping[str]) -> set[str]:
    """Header names a sender listed in ``Connection``: hop-by-hop for this one connection."""
    names: set[str] = set()
    for value in headers.getall("Connection", []):
        names.update(token.strip().lower() for token in value.split(",") if token.strip())
    return names


# Never passed on, in either direction; one set, so each header costs one lookup.
_NOT_PASSED_ON = HOP_BY_HOP | _FRAMING


def _end_to_end(headers: MultiMapping[str], *, drop_idem: bool) -> CIMultiDict[str]:
    """The headers worth passing on, in one pass: every request and answer goes through here."""
    nominated = nominated_by_connection(headers)
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if (
            lower in _NOT_PASSED_ON
            or lower in nominated
            or (drop_idem and lower.startswith(IDEM_PREFIX))
        ):
            continue
        kept.add(name, value)
    return kept


def upstream_request_headers(headers: MultiMapping[str], *, keep_length: bool) -> CIMultiDict[str]:
    """The client's headers as the upstream should see them: no hop-by-hop, no ``Idem-*``.

    ``Host`` is dropped so the client library sets the upstream's own. ``Content-Length`` is
    kept only when the body is streamed through unchanged.
    """
    kept = _end_to_end(headers, drop_idem=True)
    if keep_length and "Content-Length" in headers:
        kept["Content-Length"] = headers["Content-Length"]
    return kept


def ask_decodable_codings(headers: CIMultiDict[str]) -> None:
    """Narrow the agent's ``Accept-Encoding`` to codings the proxy can undo, so that it can
    read every answer it records (external ids, compensations); no value stays no value."""
    accepted = headers.getall("Accept-Encoding", [])
    if accepted:
        headers["Accept-Encoding"] = decodable_only(", ".join(accepted))


def own_read_headers(agent_headers: MultiMapping[str]) -> CIMultiDict[str]:
    """The headers of a read the proxy sends on its own (a read-back): the agent's credentials,
    no body headers, and an uncompressed answer, which is the simplest to read and to store."""
    headers = upstream_request_headers(agent_headers, keep_length=False)
    for name in ("Content-Type", "Content-Encoding"):
        headers.popall(name, None)
    headers["Accept-Encoding"] = IDENTITY
    return headers


def client_response_headers(headers: MultiMapping[str]) -> CIMultiDict[str]:
    """The upstream's response headers as the agent should see them."""
    kept = _end_to_end(headers, drop_idem=False)
    if "Content-Length" in headers and "Transfer-Encoding" not in headers:
        kept["Content-Length"] = headers["Content-Length"]
    return kept


def headers_to_store(
    headers: MultiMapping[str], *, allow_set_cookie: bool
) -> tuple[tuple[str, str], ...]:
    """The allow-listed subset of a response's headers that a replay repeats."""
    stored = []
    for name, value in headers.items():
        lower = name.lower()
        if lower in STORED_HEADERS or (allow_set_cookie and lower == "set-cookie"):
            stored.append((name, value))
    return tuple(stored)
