"""Transports: how the server's messages reach the clients (local in-process by default)."""

from ..federated.federation import ClientFailure, Federation
from .local import LocalFederation

__all__ = ["ClientFailure", "Federation", "LocalFederation"]
