"""Privacy of the federated protocol: what the server may learn, and how it is held to it.

:mod:`.secagg` masks every client answer the server adds up (pairwise X25519 keys, HKDF,
AES-256-CTR keystreams, fixed-point integers mod 2^64) so that the server sees only sums over
clients; :mod:`.rules` keeps every released sum over at least ``min_aggregate_rows`` rows
(candidate intervals, category groups); :mod:`.grids` places the histogram grids from
pooled information only, refined node by node.
"""
