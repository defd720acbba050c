"""An AT Protocol PDS: sessions with a DID document, and a repository with unique record keys.

Like the reference PDS (0.5, which tests/pds runs) it answers 500 to a createRecord whose record
key already exists, stores a value with the ``$type`` of its collection added when it lacks
one, answers 400 ``RecordNotFound`` to a getRecord of a key it does not hold, and names its own
URL as the PDS endpoint in the DID document it returns at login and refresh.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import time
from typing import Any

import orjson
from aiohttp import web

from tests.support.fakes.service import Service, fake_app, json_answer, perform

HANDLE = "agent.test"
DID = "did:plc:idemproxytestagent00000"


class PdsService(Service):
    def __init__(self) -> None:
        super().__init__()
        self.url = ""  # set once served: the endpoint its DID document names
        self.records: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._tids = itertools.count(1)


PDS = web.AppKey("pds", PdsService)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(scope: str) -> str:
    header = _b64(orjson.dumps({"typ": "at+jwt", "alg": "ES256K"}))
    now = int(time.time())
    claims = {"scope": scope, "sub": DID, "aud": "did:web:pds.test", "iat": now, "exp": now + 7200}
    return f"{header}.{_b64(orjson.dumps(claims))}.{_b64(b'not-a-signature')}"


def _session(service: PdsService) -> dict[str, Any]:
    return {
        "did": DID,
        "handle": HANDLE,
        "accessJwt": _jwt("com.atproto.access"),
        "refreshJwt": _jwt("com.atproto.refresh"),
        "active": True,
        "didDoc": {
            "@context": ["https://www.w3.org/ns/did/v1"],
            "id": DID,
            "alsoKnownAs": [f"at://{HANDLE}"],
            "verificationMethod": [],
            "service": [
                {
                    "id": "#atproto_pds",
                    "type": "AtprotoPersonalDataServer",
                    "serviceEndpoint": service.url,
                }
            ],
        },
    }


def _error(name: str, message: str, status: int) -> web.Response:
    return json_answer({"error": name, "message": message}, status=status)


async def create_session(request: web.Request) -> web.Response:
    service = request.app[PDS]
    body = orjson.loads(await service.record(request))
    if body.get("password") != "app-password":
        return _error("AuthenticationRequired", "Invalid identifier or password", 401)
    return json_answer(_session(service))


async def refresh_session(request: web.Request) -> web.Response:
    service = request.app[PDS]
    await service.record(request)
    return json_answer(_session(service))


async def get_profile(request: web.Request) -> web.Response:
    await request.app[PDS].record(request)
    return json_answer({"did": DID, "handle": HANDLE, "displayName": "Idem Agent"})


def _cid(record: dict[str, Any]) -> str:
    return "bafyrei" + hashlib.sha256(orjson.dumps(record)).hexdigest()[:46]


async def create_record(request: web.Request) -> web.Response:
    service = request.app[PDS]
    body: dict[str, Any] = orjson.loads(await service.record(request))
    if not request.headers.get("Authorization", "").startswith("Bearer "):
        return _error("AuthenticationRequired", "Authentication Required", 401)
    rkey = body.get("rkey") or f"3l{next(service._tids):011d}"
    place = (body["repo"], body["collection"], rkey)
    if place in service.records:
        return _error("InternalServerError", "Internal Server Error", 500)

    def apply() -> web.Response:
        uri = f"at://{DID}/{body['collection']}/{rkey}"
        value = {"$type": body["collection"], **body["record"]}
        stored = {"uri": uri, "cid": _cid(value), "value": value}
        service.records[place] = stored
        service.effects.append(stored)
        commit = {"cid": "bafyreicommit", "rev": "3l" + rkey[-11:]}
        answer = {"uri": uri, "cid": stored["cid"], "commit": commit}
        return json_answer({**answer, "validationStatus": "valid"})

    return await perform(request, service, "create", apply)


async def get_record(request: web.Request) -> web.Response:
    service = request.app[PDS]
    await service.record(request)
    query = request.query
    stored = service.records.get((query["repo"], query["collection"], query["rkey"]))
    if stored is None:
        return _error("RecordNotFound", "Could not locate record", 400)
    return json_answer(stored)


def build_pds_app(*, gzip: bool = False) -> web.Application:
    app = fake_app(gzip=gzip)
    app[PDS] = PdsService()
    xrpc = "/xrpc/"
    app.router.add_post(xrpc + "com.atproto.server.createSession", create_session)
    app.router.add_post(xrpc + "com.atproto.server.refreshSession", refresh_session)
    app.router.add_get(xrpc + "app.bsky.actor.getProfile", get_profile)
    app.router.add_post(xrpc + "com.atproto.repo.createRecord", create_record)
    app.router.add_get(xrpc + "com.atproto.repo.getRecord", get_record)
    return app
