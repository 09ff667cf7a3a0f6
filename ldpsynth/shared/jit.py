"""numba where it is installed (the ``[aggregator]`` extra): one optional import, one way to compile.

Without numba (the ``[client]`` extra) :data:`numba` is None, :func:`compiled` returns the function
unchanged and the callers take their numpy paths, which compute the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import TypeVar, cast

try:
    import numba
except ImportError:  # the [client] extra: callers use their numpy paths
    numba = None  # type: ignore[assignment]  # the optional-import idiom

__all__ = ["compiled", "numba"]

F = TypeVar("F", bound=Callable[..., object])


def compiled(function: F, *, fastmath: Set[str] = frozenset(), inline: bool = False) -> F:
    """``function`` compiled by numba in nopython mode, GIL released and cached on disk (``inline``:
    inlined into its compiled callers); unchanged without numba, where nothing calls it."""
    if numba is None:
        return function
    options = {"inline": "always"} if inline else {"nogil": True, "cache": True, "fastmath": set(fastmath)}
    return cast(F, numba.njit(**options)(function))
