"""A thread-safe in-memory cache with a time to live and stale-while-revalidate.

A fresh entry is served as it is; an expired one is served at once while a single background
refresh runs; while the service is unreachable the expired entry keeps being served (up to
``max_stale``) until a refresh succeeds. Least recently used entries go first when full.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Generic, Optional, Tuple, TypeVar

T = TypeVar("T")


class TtlCache(Generic[T]):
    def __init__(
        self,
        ttl: float,
        max_stale: Optional[float],
        max_entries: int,
        now: Callable[[], float],
    ) -> None:
        self._ttl = ttl
        self._max_stale = max_stale
        self._max_entries = max_entries
        self._now = now
        self._entries: "OrderedDict[str, Tuple[T, float]]" = OrderedDict()
        self._refreshing: Dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def lookup(self, key: str) -> Tuple[str, Optional[T]]:
        """Answers ("fresh" | "stale" | "miss", value)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return "miss", None
            self._entries.move_to_end(key)
            value, stored_at = entry
            age = self._now() - stored_at
            if age < self._ttl:
                return "fresh", value
            if self._max_stale is not None and age - self._ttl > self._max_stale:
                del self._entries[key]
                return "miss", None
            return "stale", value

    def set(self, key: str, value: T) -> None:
        with self._lock:
            self._entries[key] = (value, self._now())
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def delete(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self, prefix: str = "") -> None:
        """Drops every entry whose key starts with ``prefix`` (all of them without one)."""
        with self._lock:
            for key in [k for k in self._entries if k.startswith(prefix)]:
                del self._entries[key]

    def revalidate(self, key: str, refresh: Callable[[], None]) -> threading.Thread:
        """Runs ``refresh`` in a background thread unless one already runs for ``key``."""
        with self._lock:
            running = self._refreshing.get(key)
            if running is not None:
                return running

            def run() -> None:
                try:
                    refresh()
                finally:
                    with self._lock:
                        self._refreshing.pop(key, None)

            thread = threading.Thread(target=run, name=f"prompt-service-refresh", daemon=True)
            self._refreshing[key] = thread
            thread.start()
            return thread

    def settled(self, timeout: Optional[float] = None) -> None:
        """Waits for the background refreshes running now (tests, shutdown)."""
        while True:
            with self._lock:
                threads = list(self._refreshing.values())
            if not threads:
                return
            for thread in threads:
                thread.join(timeout)
            if timeout is not None:
                return


def stable_key(value: Any) -> str:
    """A key that does not depend on the order of mapping fields."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
