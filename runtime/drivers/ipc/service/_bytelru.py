"""A mapping bounded by the bytes its entries account for (the driver's per-connection caches).

Example:
    >>> cache = ByteLru(10)
    >>> cache.put("a", "first", 6), cache.put("b", "second", 6), cache.get("a"), cache.bytes
    (True, True, None, 6)
"""
from __future__ import annotations

from collections import OrderedDict


class ByteLru:
    """A mapping bounded by the bytes its entries account for, evicting the least recently used;
    an entry larger than the whole bound is not kept."""

    __slots__ = ("limit", "bytes", "_items")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0
        self._items: OrderedDict = OrderedDict()  # key -> (value, size)

    def get(self, key, default=None):
        item = self._items.get(key)
        if item is None:
            return default
        self._items.move_to_end(key)
        return item[0]

    def put(self, key, value, size: int) -> bool:
        """Keep ``value`` under ``key``, charged ``size`` bytes; False when it is too large."""
        self.pop(key)
        if size > self.limit:
            return False
        while self.bytes + size > self.limit:
            self.bytes -= self._items.popitem(last=False)[1][1]
        self._items[key] = (value, size)
        self.bytes += size
        return True

    def pop(self, key, default=None):
        item = self._items.pop(key, None)
        if item is None:
            return default
        self.bytes -= item[1]
        return item[0]

    def values(self):
        return [value for value, _ in self._items.values()]

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items
