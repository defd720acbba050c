"""Open a store from its URL; the scheme picks the backend.

Opening connects to nothing: a store that is down at start-up is reported by its first call
(``/readyz`` answers 503 until it is back), never mistaken for a configuration error.
"""

from __future__ import annotations

import re
from pathlib import Path

from idemproxy.store.errors import InvalidStoreURL, StoreNotFound
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.retention import DEFAULT_RETENTION, Retention

VALID_FORMS = """valid store URLs are:
  redis://[user:password@]host[:port][/db]      e.g. redis://127.0.0.1:6379/0
  rediss://[user:password@]host[:port][/db]     Redis over TLS
  redis+sentinel://host:port[,host:port...]/service_name[/db]
                                                e.g. redis+sentinel://s1:26379,s2:26379/mymaster
  redis+cluster://host:port[,host:port...]      e.g. redis+cluster://node1:6379,node2:6379
  sqlite:///relative/path.db                    e.g. sqlite:///var/idemproxy.db
  sqlite:////absolute/path.db                   e.g. sqlite:////var/lib/idemproxy/effects.db
  memory://                                     tests only: nothing survives a restart
A redis URL may end in ?wait_replicas=N[&wait_timeout_ms=M][&wait_aof=1]: each claim then waits
for N replicas to have it (docs/configuration.md)."""

_REDIS_SCHEMES = ("redis", "rediss", "redis+sentinel", "redis+cluster")


def open_store(url: str, *, create: bool = True, retention: Retention = DEFAULT_RETENTION) -> Store:
    """The store named by ``url``; :class:`InvalidStoreURL` lists the valid forms otherwise.

    ``retention`` (the proxy's ``retention:`` settings) is handed to the backend, whose parts
    all keep events, audit entries and archives by it.

    ``create`` (a proxy) makes a SQLite file and its directory where there is none. Without
    it (the CLI) a store must be there already: :class:`StoreNotFound` says where it looked.
    """
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise _invalid(url, "it has no scheme")
    if scheme == "memory":
        if not create:
            raise StoreNotFound(
                "memory:// lives inside the process that opened it: no other process can"
                " reach a proxy's memory store. Use that proxy's admin API (--admin-url)"
            )
        return MemoryStore(retention=retention)
    if scheme == "sqlite":
        return _open_sqlite(url, create, retention)
    if scheme in _REDIS_SCHEMES:
        # Imported here so that a deployment on SQLite never loads the Redis client.
        from idemproxy.store.redis.store import RedisStore

        try:
            return RedisStore.from_url(url, retention=retention)
        except InvalidStoreURL as exc:
            raise _invalid(url, str(exc)) from exc
    raise _invalid(url, f"no store backend is called {scheme!r}")


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite://`` URL names (SQLAlchemy style: three slashes, then the path)."""
    rest = url.partition("://")[2]
    if not rest.startswith("/") or rest in ("/", "//"):
        # sqlite://host/... names a host, which SQLite has no use for.
        raise _invalid(url, "a sqlite URL is sqlite:///relative.db or sqlite:////absolute.db")
    path = rest[1:]
    if "?" in path or "#" in path:
        raise _invalid(url, "a sqlite URL takes no query or fragment")
    return Path(path)


def relative_path_note(url: str) -> str:
    """For a ``sqlite:///relative.db`` URL, what the path is relative to; else ''."""
    path = sqlite_path(url) if url.lower().startswith("sqlite:") else None
    if path is None or path.is_absolute():
        return ""
    return (
        f"{url} names a path relative to the working directory {Path.cwd()}; an absolute path"
        " takes four slashes: sqlite:////var/lib/idemproxy/effects.db"
    )


def store_location(url: str) -> str:
    """Where the store is, fit for a log line: a SQLite file's absolute path, or the URL with
    any password masked."""
    if url.lower().startswith("sqlite:"):
        return str(sqlite_path(url).resolve())
    return _PASSWORD.sub(r"\1***@", url)


# The password of redis://user:password@host or redis://:password@host, up to the last '@'
# of the authority (a password may hold '@').
_PASSWORD = re.compile(r"^([a-z+]+://[^/:@]*:)[^/]*@", re.IGNORECASE)


def _open_sqlite(url: str, create: bool, retention: Retention) -> Store:
    from idemproxy.store.sqlite import SQLiteStore

    path = sqlite_path(url)
    if not create:
        if not path.is_file():
            raise _not_found(url, path)
        return SQLiteStore(path, create=False, retention=retention)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _invalid(url, f"cannot create the directory {path.parent}: {exc}") from exc
    return SQLiteStore(path, retention=retention)


def _not_found(url: str, path: Path) -> StoreNotFound:
    missing = next((p for p in reversed(path.resolve().parents) if not p.exists()), None)
    why = f"the directory {missing} does not exist" if missing else "the file does not exist"
    where = relative_path_note(url)
    return StoreNotFound(
        f"no store at {path.resolve()}: {why}{f' ({where})' if where else ''}. Check the"
        " path: only `idemproxy serve` creates a store"
    )


def _invalid(url: str, why: str) -> InvalidStoreURL:
    return InvalidStoreURL(f"cannot open store {url!r}: {why}.\n{VALID_FORMS}")
