"""The pipelined connection's wire: error replies as redis-py's exceptions, the handshake."""

from __future__ import annotations

import hiredis
import pytest
from redis.exceptions import (
    AuthenticationError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)

from idemproxy.store.redis.wire import Endpoint, reply_error


@pytest.mark.parametrize(
    ("reply", "raised"),
    [
        ("NOSCRIPT No matching script", NoScriptError),
        ("READONLY You can't write against a read only replica.", ReadOnlyError),
        ("WRONGPASS invalid username-password pair", AuthenticationError),
        ("ERR unknown command 'WAITAOF'", ResponseError),
    ],
)
def test_an_error_reply_is_raised_as_redis_py_would(reply: str, raised: type[RedisError]) -> None:
    error = reply_error(hiredis.ReplyError(reply))
    assert type(error) is raised
    assert str(error) == reply


def test_a_new_connection_authenticates_and_selects_its_database_first() -> None:
    assert Endpoint().handshake() == []
    assert Endpoint(db=3, password="secret").handshake() == [("AUTH", "secret"), ("SELECT", 3)]
    assert Endpoint(username="proxy", password="secret").handshake() == [
        ("AUTH", "proxy", "secret")
    ]
