"""Run the reference proxy (shared/bench/miniproxy.py) unchanged, on the bench's Redis.

The reference connects to Redis on port 6379, fixed. The bench gives both proxies one private
Redis instead, so they use the same server, its command counts are theirs alone, and nothing
is left behind on a shared Redis. Usage: python reference.py MINIPROXY_PY MODE PORT [uvloop]
with BENCH_REDIS_PORT set.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

import redis.asyncio

_PORT = int(os.environ["BENCH_REDIS_PORT"])


class _BenchRedis(redis.asyncio.Redis):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["port"] = _PORT
        super().__init__(*args, **kwargs)


redis.asyncio.Redis = _BenchRedis  # type: ignore[misc]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
