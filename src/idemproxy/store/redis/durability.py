"""What Redis says of its own durability (store/safety.py :class:`Durability`).

Read with ``CONFIG GET`` where the server allows it, else from ``INFO`` (managed services often
disable CONFIG): ``maxmemory_policy`` and ``aof_enabled``, though not the snapshot schedule.
``INFO`` also gives the evictions the server counted and its run id, which changes when it
restarts. On Redis Cluster every master is asked, and the least durable answer counts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from idemproxy.store.redis.errors import translated
from idemproxy.store.safety import Durability

Execute = Callable[..., Awaitable[Any]]
_SETTINGS = ("maxmemory-policy", "appendonly", "appendfsync", "save")


async def durability(client: Redis | RedisCluster) -> Durability:
    """Every master's answer, the least durable first; see the module docstring."""
    with translated("durability"):
        if not isinstance(client, RedisCluster):
            return await _server_durability(client.execute_command)
        await client.initialize()
        masters = client.get_primaries()
        answers = [await _server_durability(node.execute_command) for node in masters]
    return _least_durable([str(node.name) for node in masters], answers)


async def _server_durability(execute: Execute) -> Durability:
    config, config_refused = await _config(execute)
    info, info_refused = await _info(execute)
    evicted = _int(info.get("evicted_keys")) if info else None
    server_id = str(info.get("run_id", "")) if info else ""
    persistent: bool | None
    if config is not None:
        policy: str | None = config["maxmemory-policy"]
        persistent, persistence = _from_config(config)
    elif info is not None:
        policy = str(info["maxmemory_policy"]) if "maxmemory_policy" in info else None
        persistent, persistence = _from_info(info, config_refused)
    else:
        policy, persistent = None, None
        persistence = (
            f"neither CONFIG GET ({config_refused}) nor INFO ({info_refused}) is allowed to"
            " the proxy's Redis user"
        )
    return Durability(policy, persistent, persistence, evicted, server_id)


async def _config(execute: Execute) -> tuple[dict[str, str] | None, str]:
    """The settings that make Redis durable, or None and why CONFIG GET was refused."""
    settings = {}
    for name in _SETTINGS:
        try:
            reply = await execute("CONFIG", "GET", name)
        except ResponseError as exc:  # renamed away (managed services) or not in the user's ACL
            return None, str(exc)
        settings[name] = _text(_reply_value(reply, name))
    return settings, ""


async def _info(execute: Execute) -> tuple[dict[str, Any] | None, str]:
    try:
        info = await execute("INFO")
    except ResponseError as exc:
        return None, str(exc)
    return (dict(info), "") if isinstance(info, Mapping) else (None, "INFO gave no sections")


def _reply_value(reply: Any, name: str) -> Any:
    """CONFIG GET's answer, as a mapping (redis-py's parse) or the raw flat list."""
    if isinstance(reply, Mapping):
        return reply.get(name, reply.get(name.encode(), ""))
    values = dict(zip(reply[::2], reply[1::2], strict=True))
    return values.get(name, values.get(name.encode(), ""))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _from_config(config: Mapping[str, str]) -> tuple[bool, str]:
    if config["appendonly"] == "yes":
        fsync = config["appendfsync"]
        risk = {
            "everysec": ": a crash can lose the last second of records",
            "no": ": the system writes it out when it likes, so a crash can lose many seconds",
        }.get(fsync, "")
        return True, f"appendonly yes, appendfsync {fsync}{risk}"
    save = config["save"]
    if not save:
        return False, "appendonly no and no snapshots (save ''): a restart loses every record"
    return False, (
        f"appendonly no, only snapshots (save '{save}'): a restart loses every record written"
        " since the last snapshot"
    )


def _from_info(info: Mapping[str, Any], config_refused: str) -> tuple[bool | None, str]:
    where = f"read from INFO, CONFIG GET is refused ({config_refused})"
    enabled = info.get("aof_enabled")
    if enabled not in (0, 1):
        return None, f"INFO does not say whether the append-only file is on; {where}"
    if enabled == 1:
        return True, f"aof_enabled:1 ({where})"
    return False, (
        f"aof_enabled:0, so at best snapshots, which lose every record written since the last"
        f" one ({where})"
    )


def _least_durable(names: Sequence[str], answers: Sequence[Durability]) -> Durability:
    """One answer for a cluster: unsafe if any master is, unknown if any is unknown."""
    policies = [answer.eviction_policy for answer in answers]
    unsafe = [policy for policy in policies if policy not in ("noeviction", None)]
    policy = unsafe[0] if unsafe else (None if None in policies else "noeviction")
    kept = [answer.persistent for answer in answers]
    persistent = False if False in kept else (None if None in kept else True)
    evictions = [answer.evicted_keys for answer in answers]
    return Durability(
        eviction_policy=policy,
        persistent=persistent,
        persistence="; ".join(
            f"{name}: {answer.persistence}" for name, answer in zip(names, answers, strict=True)
        ),
        evicted_keys=None if None in evictions else sum(e or 0 for e in evictions),
        server_id=" ".join(answer.server_id for answer in answers),
    )
