"""The Redis store's record operations: one round trip each, the replay's body included."""

from __future__ import annotations

from typing import Any

import fakeredis

from idemproxy.store.records import RecordKey, Standing
from idemproxy.store.redis.store import RedisStore
from tests.store.test_contract import claim_fence, claim_request, completed


class CountingRedis(fakeredis.FakeAsyncRedis):
    """A fake Redis that notes the name of every command it is sent."""

    commands: list[str]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


async def test_claim_settle_renew_and_replay_are_one_round_trip_each() -> None:
    client = CountingRedis(server=fakeredis.FakeServer())
    client.commands = []
    store = RedisStore(client)
    try:
        # The first call of each script loads it; count only once they are cached.
        warm = RecordKey("agent", "warm-up")
        warm_fence = await claim_fence(store, claim_request(warm))
        await store.renew(warm, warm_fence, 1000)
        await store.settle(warm, warm_fence, completed())
        key = RecordKey("agent", "e1")
        client.commands.clear()
        fence = await claim_fence(store, claim_request(key))
        assert client.commands == ["EVALSHA"]
        await store.renew(key, fence, 60_000)
        assert client.commands == ["EVALSHA"] * 2
        await store.settle(key, fence, completed(body=b"x" * 10_000))
        assert client.commands == ["EVALSHA"] * 3
        replay = await store.claim(claim_request(key))
        assert client.commands == ["EVALSHA"] * 4
        assert isinstance(replay, Standing)
        assert replay.record.response is not None
        assert replay.record.response.body == b"x" * 10_000
    finally:
        await store.close()
