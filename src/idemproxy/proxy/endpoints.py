"""Keep the agent on the proxy when a response names an endpoint its client would switch to.

An atproto client moves its base URL to the PDS endpoint in the DID document that login and
session refresh return; followed as is, every later call would bypass the proxy. Such a
response is read whole and the endpoint pointed at this proxy's own URL for the upstream.
"""

from __future__ import annotations

from aiohttp import ClientResponse, web
from multidict import CIMultiDict

from idemproxy.proxy.upstreams import Target


def rewrites_endpoints(target: Target) -> bool:
    """True when the answer to this request names an endpoint to point back at the proxy."""
    return target.upstream.adapter.rewrites_session(target.path)


def ask_identity_encoding(headers: CIMultiDict[str]) -> None:
    """A compressed body cannot be rewritten (the proxy never decompresses): ask for none."""
    headers.popall("Accept-Encoding", None)
    headers["Accept-Encoding"] = "identity"


def proxy_base_url(request: web.Request, target: Target) -> str:
    """This proxy's URL for the upstream, as the agent reached it."""
    return f"{request.scheme}://{request.host}/{target.upstream.name}"


async def rewritten_response(
    request: web.Request, target: Target, answer: ClientResponse, headers: CIMultiDict[str]
) -> web.Response:
    """The upstream's answer with its endpoints pointed at the proxy."""
    body = await answer.read()
    if "Content-Encoding" not in answer.headers:
        body = target.upstream.adapter.rewrite_session(body, proxy_base_url(request, target))
    headers.popall("Content-Length", None)
    return web.Response(status=answer.status, reason=answer.reason, body=body, headers=headers)
