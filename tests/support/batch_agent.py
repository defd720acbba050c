"""An agent process for end-to-end tests: one batch of tool calls, each posting a message
through idemproxy, tagged by :mod:`idemproxy.agent`.

    python -m tests.support.batch_agent PROXY_URL BATCH CALLS [--pause-after N]

Prints one JSON line per tool call (its status and ``Idem-Outcome``). With ``--pause-after N``
it stops to "think" for a minute after the N-th call, so a test can kill it right there.
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
import orjson

from idemproxy import agent

PAUSE_S = 60.0


async def run_batch(proxy_url: str, batch: str, calls: int, pause_after: int | None) -> None:
    async with aiohttp.ClientSession(middlewares=(agent.aiohttp_middleware,)) as session:
        with agent.batch(batch):
            for number in range(1, calls + 1):
                with agent.tool_call(f"call-{number}", action="post_update"):
                    body = {"text": f"update {number} of {batch}"}
                    async with session.post(f"{proxy_url}/up/messages", json=body) as response:
                        answer = await response.json()
                        line = {
                            "tool_call": f"call-{number}",
                            "status": response.status,
                            "outcome": response.headers.get("Idem-Outcome"),
                            "id": answer.get("id"),
                        }
                print(orjson.dumps(line).decode(), flush=True)
                if number == pause_after:
                    await asyncio.sleep(PAUSE_S)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("proxy_url")
    parser.add_argument("batch")
    parser.add_argument("calls", type=int)
    parser.add_argument("--pause-after", type=int)
    args = parser.parse_args()
    asyncio.run(run_batch(args.proxy_url, args.batch, args.calls, args.pause_after))


if __name__ == "__main__":
    main()
