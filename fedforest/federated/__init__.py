"""The federated engine: the protocol, the clients' computations and the server's growth.

Data flows one way: :mod:`.client` (with :mod:`.client_kernels` and :mod:`.client_sketch`)
answers the server's messages (:mod:`.protocol`) from its own rows; the server
(:mod:`.server`) talks to clients only through a :class:`~.federation.Federation`.
"""
