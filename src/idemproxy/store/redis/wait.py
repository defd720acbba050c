"""A script whose writes replicas must confirm: the script, then ``WAIT``, on one connection.

``WAIT`` counts the replicas that have every write its own connection made, so it has to
follow the script on the script's connection, and nothing of ours may come between:

- the pipelined connection of a single node writes it after the commands of the loop turn,
  one ``WAIT`` for all the claims of the turn (:meth:`PipelinedRedis.execute_then`);
- a pooled client (TLS, Sentinel) sends both in one redis-py pipeline, which holds one
  connection for it;
- on Redis Cluster both go, in one pipeline, to the node that serves the script's slot. A slot
  that moved answers ``MOVED`` and runs nothing: the client learns where it went and the pair
  is sent there. Redirections are not followed otherwise, since a ``WAIT`` on one node says
  nothing of a script that ran on another.

Each returns the script's reply and the wait's (a count, or the error it met as a value);
:meth:`ReplicaWait.shortfall` reads the latter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import MovedError, NoScriptError

from idemproxy.store.redis.pipeline import PipelinedRedis, PipelinedScript
from idemproxy.store.redis.replicas import ReplicaWait

ScriptArg = str | int | bytes


class WaitedScript(Protocol):
    """Runs the script, then the wait; returns both replies."""

    async def __call__(
        self, keys: Sequence[str], args: Sequence[ScriptArg]
    ) -> tuple[Any, object]: ...


def waited_script(
    client: Redis | RedisCluster, pipeline: PipelinedRedis | None, source: str, wait: ReplicaWait
) -> WaitedScript:
    """``source`` run with ``wait`` after it, over ``pipeline`` where there is one."""
    if pipeline is not None:
        return _PipelinedWaited(PipelinedScript(pipeline, source), wait)
    if isinstance(client, RedisCluster):
        return _ClusterWaited(client, source, wait)
    return _PooledWaited(client, source, wait)


class _PipelinedWaited:
    def __init__(self, script: PipelinedScript, wait: ReplicaWait) -> None:
        self._script = script
        self._command = wait.command()

    async def __call__(self, keys: Sequence[str], args: Sequence[ScriptArg]) -> tuple[Any, object]:
        return await self._script.then(self._command, keys, args)


class _PooledWaited:
    """Both in one redis-py pipeline on a pooled connection."""

    def __init__(self, client: Redis | RedisCluster, source: str, wait: ReplicaWait) -> None:
        self._client = client
        self._source = source
        self._sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
        self._command = wait.command()

    async def __call__(self, keys: Sequence[str], args: Sequence[ScriptArg]) -> tuple[Any, object]:
        replies = await self._sent("EVALSHA", self._sha, keys, args)
        if isinstance(replies[0], NoScriptError):
            # Nothing ran; EVAL runs the script and caches it again.
            replies = await self._sent("EVAL", self._source, keys, args)
        script, waited = replies
        if isinstance(script, Exception):
            raise script
        return script, waited

    async def _sent(
        self, command: str, script: str, keys: Sequence[str], args: Sequence[ScriptArg]
    ) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        pipe.execute_command(command, script, len(keys), *keys, *args)
        pipe.execute_command(*self._command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies


class _ClusterWaited(_PooledWaited):
    """Both in one pipeline to the node of the script's slot, wherever that slot moved."""

    _client: RedisCluster

    async def _sent(
        self, command: str, script: str, keys: Sequence[str], args: Sequence[ScriptArg]
    ) -> list[Any]:
        replies = await self._to_slot_node(command, script, keys, args)
        if isinstance(replies[0], MovedError):
            await self._client.nodes_manager.move_slot(replies[0])
            replies = await self._to_slot_node(command, script, keys, args)
        return replies

    async def _to_slot_node(
        self, command: str, script: str, keys: Sequence[str], args: Sequence[ScriptArg]
    ) -> list[Any]:
        await self._client.initialize()  # at once when it already knows the slots
        # Every key of a script is in the agent's slot (store/redis/keys.py).
        node = self._client.get_node_from_key(keys[0])
        pipe = self._client.pipeline()
        pipe.execute_command(command, script, len(keys), *keys, *args, target_nodes=node)
        pipe.execute_command(*self._command, target_nodes=node)
        replies: list[Any] = await pipe.execute(raise_on_error=False, allow_redirections=False)
        return replies
