"""multipart/form-data parsing: the parts as a server reads them, or None for a broken frame."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import payload

from idemproxy import multipart

BOUNDARY = "XyZ123"
TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def body_of(*parts: bytes, preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    framed = b"".join(f"--{BOUNDARY}\r\n".encode() + part + b"\r\n" for part in parts)
    return preamble + framed + f"--{BOUNDARY}--\r\n".encode() + epilogue


TEXT = b'Content-Disposition: form-data; name="purpose"\r\n\r\nassistants'
FILE = (
    b'Content-Disposition: form-data; name="file"; filename="a b.txt"\r\n'
    b"Content-Type: Text/Plain; charset=utf-8\r\n\r\nline one\r\nline two"
)


def test_parts_come_in_order_with_name_filename_type_and_content() -> None:
    body = body_of(TEXT, FILE)
    parts = multipart.parse(body, BOUNDARY)

    assert parts is not None
    assert [(p.name, p.filename, p.content_type, p.content) for p in parts] == [
        ("purpose", None, "text/plain", b"assistants"),
        ("file", "a b.txt", "text/plain", b"line one\r\nline two"),
    ]
    assert body[parts[1].start : parts[1].end] == b"line one\r\nline two"


def test_preamble_epilogue_and_transport_padding_are_ignored() -> None:
    body = body_of(TEXT, preamble=b"ignored\r\n", epilogue=b"also ignored")
    body = body.replace(f"--{BOUNDARY}\r\n".encode(), f"--{BOUNDARY}  \r\n".encode(), 1)
    parts = multipart.parse(body, BOUNDARY)
    assert parts is not None
    assert [p.content for p in parts] == [b"assistants"]


@pytest.mark.parametrize(
    "broken",
    [
        body_of(TEXT)[:-12],  # no close delimiter
        body_of(TEXT).replace(b"\r\n", b"\n"),  # bare line feeds
        body_of(b"Content-Type: text/plain\r\n\r\nno name"),
        b"no delimiter at all",
    ],
)
def test_a_body_not_framed_by_the_boundary_is_not_parsed(broken: bytes) -> None:
    assert multipart.parse(broken, BOUNDARY) is None


async def test_what_aiohttp_writes_parses_back() -> None:
    form = aiohttp.FormData()
    form.add_field("payload_json", '{"content": "hi"}')
    form.add_field("files[0]", b"\x00\xffbinary", filename="r.bin", content_type="image/png")
    written = form()
    assert isinstance(written, payload.Payload)
    body = await written.as_bytes()
    boundary = multipart.boundary_of(written.content_type)

    assert boundary is not None
    parts = multipart.parse(body, boundary)
    assert parts is not None
    assert [(p.name, p.filename, p.content) for p in parts] == [
        ("payload_json", None, b'{"content": "hi"}'),
        ("files[0]", "r.bin", b"\x00\xffbinary"),
    ]


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [
        (TYPE, BOUNDARY),
        ('multipart/form-data; boundary="a b:c"', "a b:c"),
        ("Multipart/Form-Data;boundary=q", "q"),
        ("multipart/mixed; boundary=q", None),
        ("multipart/form-data", None),
        ("application/json", None),
    ],
)
def test_the_boundary_is_read_from_the_content_type(
    content_type: str, boundary: str | None
) -> None:
    assert multipart.boundary_of(content_type) == boundary


def test_a_part_is_replaced_in_place_unless_the_new_content_holds_the_boundary() -> None:
    body = body_of(TEXT, FILE)
    parts = multipart.parse(body, BOUNDARY)
    assert parts is not None

    replaced = multipart.replaced(body, BOUNDARY, parts[0], b"batch")

    assert replaced is not None
    again = multipart.parse(replaced, BOUNDARY)
    assert again is not None
    assert [p.content for p in again] == [b"batch", parts[1].content]
    assert multipart.replaced(body, BOUNDARY, parts[0], f"x--{BOUNDARY}".encode()) is None
