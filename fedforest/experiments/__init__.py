"""Experiments that regenerate the papers' tables and figures (not imported by the core).

The FedForest paper's experiments: :mod:`fedforest.experiments.paper`
(``fedforest experiment NAME``).
"""
