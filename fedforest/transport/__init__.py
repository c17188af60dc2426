"""Transports: how the server's messages reach the clients (local in-process by default).

Names load on first use (PEP 562): importing fedforest never imports Dask
(``DaskFederation``, clients as Dask actors, ``fedforest.transport.dask``), and a Flower
ClientApp process imports ``fedforest.transport.flower`` without the local transport.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..federated.federation import ClientFailure, Federation
    from .dask import DaskFederation
    from .local import LocalFederation

__all__ = ["ClientFailure", "DaskFederation", "Federation", "LocalFederation"]

_WHERE = {
    "ClientFailure": "..federated.federation",
    "DaskFederation": ".dask",
    "Federation": "..federated.federation",
    "LocalFederation": ".local",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
