"""Per-tenant settings: what a tenant (its own key, or an admin) may choose for itself.

A tenant stores only what it set; every setting it leaves unset follows the server's config (the option
of the same name under ``[memory]``), so changing that option changes every tenant that set nothing. The
catalog keeps them durable (``Catalog.update_settings``); this module names them and checks values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from server.config import MemoryConfig
from server.errors import InvalidArgument

# name -> (lowest, highest) accepted value
RANGES: dict[str, tuple[float, float]] = {
    "min_salience": (0.0, 1.0),   # memory.min_salience: writes below this salience are skipped; 0 = never
}


@dataclass(frozen=True)
class TenantSettings:
    min_salience: float | None = None   # None: the server's memory.min_salience

    @staticmethod
    def from_stored(stored: Mapping[str, float]) -> TenantSettings:
        return TenantSettings(**{k: float(v) for k, v in stored.items() if k in RANGES})

    def effective(self, memory: MemoryConfig) -> TenantSettings:
        """Every field set: the tenant's own value, else the server's."""
        return TenantSettings(min_salience=memory.min_salience if self.min_salience is None else self.min_salience)


def checked_update(values: Mapping[str, float], reset: Sequence[str]) -> tuple[dict[str, float], list[str]]:
    """The update as the catalog stores it, or InvalidArgument naming the first bad part (nothing applied)."""
    if not values and not reset:
        raise InvalidArgument("nothing to update: set a setting or name one in reset "
                              f"(settings: {', '.join(sorted(RANGES))})")
    for name in reset:
        if name not in RANGES:
            raise InvalidArgument(f"reset: unknown setting {name!r} (settings: {', '.join(sorted(RANGES))})")
        if name in values:
            raise InvalidArgument(f"{name} is both set and reset")
    out: dict[str, float] = {}
    for name, value in values.items():
        low, high = RANGES[name]
        if not math.isfinite(value) or not low <= value <= high:
            raise InvalidArgument(f"settings.{name} must be in [{low:g}, {high:g}], got {value!r}")
        out[name] = round(float(value), 6)   # a proto float32 0.05 reads 0.0500000007
    return out, sorted(set(reset))
