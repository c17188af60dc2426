"""fedforest: federated random forests whose splits equal centralized CART on pooled data."""

from ._io import load
from .client import Client
from .diagnostics import DiagnosticReport, diagnose
from .forest import FedForestClassifier, FedForestRegressor
from .protocol import CommunicationLedger
from .transport import Federation, LocalFederation

__all__ = [
    "Client",
    "CommunicationLedger",
    "DiagnosticReport",
    "FedForestClassifier",
    "FedForestRegressor",
    "Federation",
    "LocalFederation",
    "diagnose",
    "load",
]

__version__ = "0.1.0"
