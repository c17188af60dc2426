"""Round A's grids and counts, Round B's candidates, as they travel under ``"secure"``.

Every client gets every node's grid (the same edges to each), which were most of the
bytes a secure fit sends at scale (docs/privacy.md, "What it costs"). Three encodings,
a module each (this module re-exports their names; it had reached the 800-line cap):

- **Grids on a lattice** (``grid_lattice``): a grid edge travels as its ``uint32`` code
  on its feature's lattice between the root distribution's outer bounds, decoded bit for
  bit alike on both sides; an edge that must keep its value and is no lattice point, or
  a pair that snapping would reorder or move noticeably, travels as float64.
- **Candidates as indices** (``grid_candidates``): Round B's candidates are edges of the
  same level's node grids, which the client keeps from Round A: each travels as its
  index in its pair's grid (``cand_at``), lossless.
- **Counts two edges to a word** (``grid_counts``): Round A's counts travel as one masked
  ``uint64`` word per edge, two edges to a word in nodes whose pooled rows and weight are
  both below 2^16 (the request's ``hist_half``).

Every array from the server is checked on the client (kind, dtype, shape, bounds) before
use; an error names the array and the server.
"""

from __future__ import annotations

from .grid_candidates import candidate_arrays, decode_at, decode_candidates, sent_candidates
from .grid_counts import (
    HALF_LIMIT,
    half_arrays,
    half_of,
    half_pack,
    half_pack_numpy,
    half_pairs,
    half_unpack,
    half_unpack_numpy,
    half_words,
    hist_spec,
    n_hist_words,
    unpack_hist,
)
from .grid_lattice import (
    GRID_ROOM,
    LATTICE_STEPS,
    MOVE_SHARE,
    PARALLEL_EDGES,
    decode_grid,
    decode_lattice,
    decode_lattice_numpy,
    encode_grid,
    encode_lattice,
    encode_lattice_numpy,
    grid_inputs,
    grid_space,
    lattice_grid,
)

__all__ = [
    "GRID_ROOM",
    "HALF_LIMIT",
    "LATTICE_STEPS",
    "MOVE_SHARE",
    "PARALLEL_EDGES",
    "candidate_arrays",
    "decode_at",
    "decode_candidates",
    "decode_grid",
    "grid_inputs",
    "lattice_grid",
    "decode_lattice",
    "decode_lattice_numpy",
    "grid_space",
    "encode_grid",
    "encode_lattice",
    "encode_lattice_numpy",
    "half_arrays",
    "half_of",
    "half_pack",
    "half_pack_numpy",
    "half_pairs",
    "half_unpack",
    "half_unpack_numpy",
    "half_words",
    "hist_spec",
    "n_hist_words",
    "unpack_hist",
    "sent_candidates",
]
