"""A thread-safe in-memory cache with a time to live and stale-while-revalidate.

A fresh entry is served as it is; an expired one is served at once while a single background
refresh runs; while the service is unreachable the expired entry keeps being served (up to
``max_stale``) until a refresh succeeds. Least recently used entries go first when full.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Deque, Dict, Generic, Optional, Tuple, TypeVar

T = TypeVar("T")

#: Background refreshes that run at once per client; the others wait their turn.
DEFAULT_REFRESH_WORKERS = 4


class RefreshPool:
    """At most ``max_workers`` daemon threads run the queued refreshes, and end when the queue
    is empty: a burst of stale keys queues work instead of starting a thread each. (Not
    ``ThreadPoolExecutor``: its threads hold the interpreter's exit until the queue is done.)"""

    def __init__(self, max_workers: int = DEFAULT_REFRESH_WORKERS) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._max_workers = max_workers
        self._queue: Deque[Callable[[], None]] = deque()
        self._workers = 0
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None]) -> None:
        with self._lock:
            self._queue.append(work)
            if self._workers >= self._max_workers:
                return
            self._workers += 1
        threading.Thread(target=self._work, name="prompt-service-refresh", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._workers -= 1
                    return
                work = self._queue.popleft()
            try:
                work()
            except BaseException:  # noqa: BLE001 - a refresh reports its own failures
                pass


class Refresh:
    """One refresh of a key, queued or running: ``join`` waits for it."""

    def __init__(self) -> None:
        self._done = threading.Event()

    def join(self, timeout: Optional[float] = None) -> None:
        self._done.wait(timeout)

    def is_alive(self) -> bool:
        return not self._done.is_set()


class TtlCache(Generic[T]):
    def __init__(
        self,
        ttl: float,
        max_stale: Optional[float],
        max_entries: int,
        now: Callable[[], float],
        pool: Optional[RefreshPool] = None,
    ) -> None:
        self._ttl = ttl
        self._max_stale = max_stale
        self._max_entries = max_entries
        self._now = now
        self._entries: "OrderedDict[str, Tuple[T, float]]" = OrderedDict()
        self._pool = pool or RefreshPool()
        self._refreshing: Dict[str, Refresh] = {}
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

    def revalidate(self, key: str, refresh: Callable[[], None], *, wait: bool = False) -> Refresh:
        """Runs ``refresh`` in the background pool unless one is already queued or running for
        ``key``; with ``wait``, in this thread (the caller waits for it anyway)."""
        with self._lock:
            running = self._refreshing.get(key)
            if running is not None:
                return running
            handle = Refresh()
            self._refreshing[key] = handle

        def run() -> None:
            try:
                refresh()
            finally:
                with self._lock:
                    self._refreshing.pop(key, None)
                handle._done.set()  # noqa: SLF001 - same module

        if wait:
            run()
        else:
            self._pool.submit(run)
        return handle

    def settled(self, timeout: Optional[float] = None) -> None:
        """Waits for the background refreshes queued or running now (tests, shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                handles = list(self._refreshing.values())
            if not handles:
                return
            for handle in handles:
                handle.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and time.monotonic() >= deadline:
                return


def stable_key(value: Any) -> str:
    """A key that does not depend on the order of mapping fields."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
