"""The operator verbs on a store no proxy need be serving (``--store URL``).

Such a verb acts with the proxy's own settings, not the defaults: the proxy's config file
(``--config``) and its ``IDEMPROXY_*`` environment, read as ``serve`` reads them, give the
limit on recovery actions (``recovery.actions_per_minute``) and, given the file, the
controller ``status`` reports on. ``store sweep`` does what a running proxy's sweep does every
``recovery.sweep_interval_s``: turns leases that lapsed ``unknown``, into review, audited.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

from idemproxy.config.loader import load_settings
from idemproxy.config.settings import ProxyConfig
from idemproxy.errors import ConfigError
from idemproxy.ledger.documents import Document
from idemproxy.ledger.service import LedgerService
from idemproxy.ledger.sweeper import sweep_lapsed
from idemproxy.store.factory import open_store
from idemproxy.store.protocols import Store
from idemproxy.store.work import Work


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        help="with --store: the proxy's config file, whose recovery.actions_per_minute (and"
        " controller) the command follows; its IDEMPROXY_* environment applies as for serve",
    )


def settings(args: argparse.Namespace) -> ProxyConfig:
    """The proxy's settings as its config file and environment give them."""
    config: Path | None = args.config
    return load_settings(config, os.environ)


@contextlib.asynccontextmanager
async def opened(args: argparse.Namespace, config: ProxyConfig) -> AsyncIterator[Store]:
    # A command never makes a store: a path no proxy used is a typo, not an empty store. It
    # keeps what it writes (an abandon's archive, audit entries) as long as the proxy would.
    store = open_store(args.store, create=False, retention=config.retention.figures())
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def ledger(args: argparse.Namespace) -> AsyncIterator[LedgerService]:
    """The ledger on ``--store``, limited and described as the proxy's config says."""
    config = settings(args)
    async with opened(args, config) as store:
        limit = config.recovery.actions_per_minute
        # Without the proxy's config file, whether it delivers events is not known here.
        controller = config.controller if args.config else None
        yield LedgerService(store, limit, controller=controller)


def refuse_config_without_store(args: argparse.Namespace) -> None:
    if getattr(args, "config", None) and not args.store:
        raise ConfigError(
            "--config is for --store: a running proxy (--admin-url) follows its own config"
        )


async def sweep(args: argparse.Namespace) -> Document:
    """Turn every lapsed lease of the store's agents unknown, each audited."""
    if not args.store:
        raise ConfigError(
            "store sweep works on a store (--store URL); a running proxy sweeps its own every"
            " recovery.sweep_interval_s"
        )
    async with opened(args, settings(args)) as store:
        swept = []
        for agent in await store.list_busy_agents(Work.REVIEW):
            for record in await sweep_lapsed(store, agent, swept_by=args.actor):
                swept.append(
                    {
                        "effect_key": str(record.key),
                        "batch": record.meta.batch,
                        "tool_call": record.meta.tool_call,
                    }
                )
        return {"store": store.backend, "swept": swept}


def run_sweep(args: argparse.Namespace) -> int:
    """``store sweep``: exits 0, having swept or found nothing to sweep."""
    document = asyncio.run(sweep(args))
    print(
        orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
        if args.json
        else swept_view(document)
    )
    return 0


def swept_view(document: Document) -> str:
    swept = document["swept"]
    if not swept:
        return f"store {document['store']}: no lease has lapsed"
    lines = [f"store {document['store']}: {len(swept)} lapsed lease(s) now unknown, in review"]
    lines += [f"  {item['effect_key']}  batch {item['batch']}" for item in swept]
    return "\n".join(lines)
