"""accl.params: the parameters ACCL runs with, through NCCL's parameter API."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

from ._loader import _accl


class Params(Mapping[str, str]):
    """Read-only mapping of every parameter's name (``NCCL_BUFFSIZE``,
    ``ACCL_TIMEOUT``, ...) to its value as text: the environment's, else the
    conf file's (``NCCL_CONF_FILE`` or ``~/.nccl.conf``, then
    ``/etc/nccl.conf``), else the default. The library reads them once, at
    first use. Integers read in decimal; ``ACCL_SECRET`` reads ``(hidden)``
    when set. docs/parameters.md says what each one does."""

    def __getitem__(self, key: str) -> str:
        if not isinstance(key, str) or key not in _accl.param_keys():
            raise KeyError(key)
        return _accl.param_get(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_accl.param_keys())

    def __len__(self) -> int:
        return len(_accl.param_keys())

    def __repr__(self) -> str:
        return f"accl.params({dict(self)!r})"


params = Params()


def dump_params() -> None:
    """ncclParamDumpAll: every parameter, its value, where the value came
    from and what it means, printed on stdout."""
    sys.stdout.flush()  # the library writes to the same descriptor
    _accl.param_dump_all()
