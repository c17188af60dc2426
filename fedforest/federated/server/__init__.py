"""The server: handshake, level-wise growth of all trees, candidates and best splits.

:mod:`.config` (what to grow, what comes back), :mod:`.grower` (rounds and stopping
rules), :mod:`.level` (one level's candidates and Round B sums), :mod:`.merge` (the
mixture-quantile merge of the clients' sketches), :mod:`.splitter` (best splits from
pooled statistics).
"""
