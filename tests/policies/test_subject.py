"""A request's body as the document approval conditions point into."""

from __future__ import annotations

from idemproxy.jsonpointer import resolve
from idemproxy.policies.approval import UNREADABLE
from idemproxy.policies.subject import body_document

FORM = "application/x-www-form-urlencoded; charset=utf-8"


def test_json_is_itself() -> None:
    assert body_document(b'{"amount": 5}', "application/json") == {"amount": 5}


def test_a_form_nests_by_its_brackets() -> None:
    # As Stripe's SDKs encode: lists by index, ``[]`` where they append.
    body = (
        b"amount=5000&metadata[order]=7&items[0][price]=3&items[1][price]=4&expand[]=x&expand[]=y"
    )
    document = body_document(body, FORM)
    assert resolve(document, "/amount") == "5000"
    assert resolve(document, "/metadata/order") == "7"
    assert (resolve(document, "/expand/0"), resolve(document, "/expand/1")) == ("x", "y")
    assert (resolve(document, "/items/0/price"), resolve(document, "/items/1/price")) == ("3", "4")


def test_an_empty_body_is_an_empty_document() -> None:
    assert body_document(b"", "application/json") == {}


def test_what_is_neither_json_nor_a_form_cannot_be_read() -> None:
    assert body_document(b"\x00\x01", "application/octet-stream") is UNREADABLE
    assert body_document("é=1".encode(), FORM) is UNREADABLE
