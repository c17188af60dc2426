"""Transports: how the server's messages reach the clients (local in-process by default).

``DaskFederation`` (clients as Dask actors, ``fedforest.transport.dask``) loads on first
use, so that importing fedforest never imports Dask.
"""

from typing import TYPE_CHECKING, Any

from ..federated.federation import ClientFailure, Federation
from .local import LocalFederation

if TYPE_CHECKING:
    from .dask import DaskFederation

__all__ = ["ClientFailure", "DaskFederation", "Federation", "LocalFederation"]


def __getattr__(name: str) -> Any:
    if name == "DaskFederation":
        from .dask import DaskFederation

        return DaskFederation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
