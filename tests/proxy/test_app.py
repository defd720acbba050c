"""The proxy app opens its client session and the flow as it starts, and closes it as it stops."""

from __future__ import annotations

from idemproxy.proxy.state import CLIENT_SESSION, EFFECT_FLOW
from tests.proxy.conftest import ProxyFactory


async def test_the_session_and_the_flow_live_as_long_as_the_app(make_proxy: ProxyFactory) -> None:
    client, _ = await make_proxy()
    app = client.app
    assert app is not None
    session = app[CLIENT_SESSION]

    assert not session.closed
    assert app[EFFECT_FLOW].forwarder.session is session

    await client.close()
    assert session.closed
