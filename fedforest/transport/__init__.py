"""Transports: how the server's messages reach the clients (local in-process by default).

Names load on first use (PEP 562): importing fedforest never imports Dask
(``DaskFederation``, clients as Dask actors, ``fedforest.transport.dask``), and a Flower
ClientApp process imports ``fedforest.transport.flower`` without the local transport.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names

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


__getattr__, __dir__ = _lazy_names(globals(), _WHERE)
