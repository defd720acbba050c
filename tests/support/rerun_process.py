"""One of the re-run agents as a process of its own, killed where the seed scenario crashes.

    python -m tests.support.rerun_process FRAMEWORK LLM_URL PROXY_URL BATCH [KILL_BEFORE]

runs the framework's agent (tests/support/rerun_agents.py) on the batch and prints its final
output; with ``KILL_BEFORE`` the process SIGKILLs itself just before the effect of the update
whose text starts with it: no exception, no cleanup, no answer, as when a pod is killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from tests.support.rerun_agents import Update, post_update, run_langgraph, run_openai_agents


def killing_poster(proxy_url: str, kill_before: str | None) -> Update:
    def post(text: str) -> str:
        if kill_before is not None and text.startswith(kill_before):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return post_update(proxy_url, text)

    return post


def main(argv: list[str]) -> None:
    framework, llm_url, proxy_url, batch, *kill = argv
    post = killing_poster(proxy_url, kill[0] if kill else None)
    if framework == "openai-agents":
        print(asyncio.run(run_openai_agents(llm_url, batch, post)))
    elif framework == "langgraph":
        print(run_langgraph(llm_url, batch, post))
    else:
        raise SystemExit(f"no agent for {framework!r}: openai-agents or langgraph")


if __name__ == "__main__":
    main(sys.argv[1:])
