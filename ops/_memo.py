"""The one bounded memo behind every per-signature cache of the package (inference, direct-call
plans, ctypes signatures, constant tensors): a dict, so a lookup stays a plain ``dict.get``, whose
``put`` empties it first when it is full, so that a program making unboundedly many shapes keeps
it bounded (a rebuild costs one slow call, never a wrong result)."""


class Memo(dict):
    """A dict of at most `size` entries (see the module's docstring)."""

    __slots__ = ("size",)

    def __init__(self, size):
        super().__init__()
        self.size = size

    def put(self, key, value):
        """Keeps `value` under `key`, the whole memo dropped first when full; returns `value`."""
        if len(self) >= self.size:
            self.clear()
        self[key] = value
        return value
