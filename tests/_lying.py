"""A real client that lies once: the hostile-sum tests' (secure aggregation and "dp")."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedforest.federated.client import Client
from fedforest.federated.protocol import Message


class Lying(Client):
    """A real client whose first reply of ``kind`` is rewritten by ``edit(header, arrays)``.

    With ``array``: its first reply of ``kind`` whose array ``array`` is not empty (the
    first with something of it to lie about). ``edit`` gets copies of the reply's header
    and arrays.
    """

    def __init__(
        self, X: Any, y: Any, name: str, kind: str, edit: Any, array: str | None = None, **kw: Any
    ) -> None:
        super().__init__(X, y, name, **kw)
        self.kind, self.edit, self.array, self.done = kind, edit, array, False

    def handle(self, msg: Message) -> Any:
        reply = super().handle(msg)
        if (
            msg.kind == self.kind
            and not self.done
            and isinstance(reply, Message)
            and (self.array is None or np.size(reply.arrays.get(self.array, ())) > 0)
        ):
            self.done = True
            arrays = {k: np.array(v) for k, v in reply.arrays.items()}
            header = dict(reply.header)
            self.edit(header, arrays)
            return Message(reply.kind, header, arrays)
        return reply
