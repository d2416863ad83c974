"""accl.group(): ncclGroupStart / ncclGroupEnd as a context manager.

NCCL's group state belongs to the calling thread, and so does this one: each
thread has its own stack of open groups. Calls made inside a group are queued
by the library and return at once; the outermost group's end runs them all.
The arrays they use (including the outputs they return) must stay alive until
then, so the group keeps a reference to every one of them.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _accl
from ._enums import Result
from ._errors import InvalidUsageError

_tls = threading.local()
_IN_PROGRESS = int(Result.IN_PROGRESS)  # a plain int: comparing with the IntEnum costs more

# One entry per group open in any thread. Every collective asks current()
# after its call; while this is empty (nearly always) that is one global read
# instead of a thread-local lookup. list.append and list.pop are atomic, so
# threads need no lock to count (a `+= 1` on an int could lose an update); a
# thread's own groups are counted before it can call anything inside them.
open_groups: list = []


def _stack() -> list[Group]:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def current() -> Group | None:
    """The innermost open group of this thread, or None."""
    if not open_groups:
        return None
    stack = _stack()
    return stack[-1] if stack else None


class Group:
    """ncclGroupStart() on entry, ncclGroupEnd() on exit (see accl.group).

    Attributes:
        simulate: end with ncclGroupSimulateEnd instead: nothing runs.
        estimated_time: after a simulated outermost group, the library's
            prediction in microseconds (None otherwise).
    """

    __slots__ = ("simulate", "estimated_time", "_keep", "_comms", "_pending", "_open", "_used", "_inner_raised")

    def __init__(self, *, simulate: bool = False):
        self.simulate = bool(simulate)
        self.estimated_time: float | None = None
        self._keep: list[Any] = []  # arrays and op handles the queued calls use
        self._comms: list[Any] = []  # communicators with queued calls (non-blocking: polled)
        self._pending: list[Any] = []  # Communicators created inside, finished at the end
        self._open = False
        self._used = False
        self._inner_raised = False  # a nested group's block raised: nothing queued may run

    # called by Communicator
    def _hold(self, comm: Any, *objs: Any) -> None:
        # Plain loops: this runs for every call queued in a group, where a
        # generator expression cost about 1 us of a grouped send's 3.
        keep = self._keep
        for o in objs:
            if o is not None:
                keep.append(o)
        if comm is not None:
            for c in self._comms:
                if c is comm:
                    return
            self._comms.append(comm)

    def _adopt(self, comm: Any) -> None:
        self._pending.append(comm)

    @property
    def depth(self) -> int:
        """How many groups of this thread are open (this one included while open)."""
        return len(_stack())

    def __enter__(self) -> Group:
        if self._used:
            raise RuntimeError("a Group can be entered only once (make a new one)")
        _accl.group_start()
        self._used = self._open = True
        _stack().append(self)
        open_groups.append(None)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        stack = _stack()
        if not stack or stack[-1] is not self:
            raise RuntimeError("groups must end in the reverse order they were started")
        stack.pop()
        open_groups.pop()
        self._open = False
        outer = stack[-1] if stack else None
        if outer is not None:
            # An inner end only closes a level; the work runs at the outermost end.
            outer._keep.extend(self._keep)
            for c in self._comms:
                outer._hold(c)
            outer._pending.extend(self._pending)
            # The queued calls of all levels are one list in the library: an
            # inner block that raised fails the outermost group as a whole.
            outer._inner_raised = outer._inner_raised or self._inner_raised or exc_type is not None
            self._release()
            if self.simulate:
                _accl.group_simulate_end()
            else:
                _accl.group_end()
            return False
        if exc_type is not None or self._inner_raised:
            # The block failed: drop what was queued (ncclGroupSimulateEnd runs
            # nothing) rather than run half a program.
            try:
                _accl.group_simulate_end()
            except Exception:  # never hide the error that got us here
                pass
            self._discard_pending()
            self._release()
            if exc_type is None:  # the inner block's exception was caught inside this one
                raise InvalidUsageError(
                    int(Result.INVALID_USAGE),
                    "a nested group's block raised: nothing queued in the outermost group ran (the library "
                    "holds one list of queued calls for all levels)")
            return False
        try:
            if self.simulate:
                self.estimated_time = float(_accl.group_simulate_end())
                self._discard_pending()  # inits queued in a simulated group never start
                return False
            try:
                state = _accl.group_end()
            except BaseException:
                self._settle_pending()
                raise
            if state == _IN_PROGRESS:
                for comm in self._comms:
                    if not comm.closed:
                        comm._wait("ncclGroupEnd")
            if self._pending:
                self._settle_pending(raise_first=True)
        finally:
            self._release()
        return False

    def _settle_pending(self, raise_first: bool = False) -> None:
        first = None
        for comm in self._pending:
            try:
                comm._finish_init()
            except BaseException as e:  # that communicator is aborted by _finish_init
                first = first or e
        self._pending = []
        if raise_first and first is not None:
            raise first

    def _discard_pending(self) -> None:
        for comm in self._pending:
            comm._discard()
        self._pending = []

    def _release(self) -> None:
        self._keep = []
        self._comms = []

    def __repr__(self) -> str:
        state = "open" if self._open else ("done" if self._used else "new")
        extra = f" estimated_time={self.estimated_time}us" if self.estimated_time is not None else ""
        return f"<accl.Group {state} simulate={self.simulate} calls_held={len(self._keep)}{extra}>"


def group(*, simulate: bool = False) -> Group:
    """A group of NCCL calls: `with accl.group(): ...` (ncclGroupStart/End).

    Inside, every collective, send and recv returns at once without having
    run; the outermost group's end runs them together (sends and receives
    then pair up in any order) and returns once all are done. Arrays passed
    in, and outputs returned, are kept alive by the group until it ends; their
    contents are only meaningful after it ends. Groups nest (only the
    outermost end runs the work). Communicators created inside (init or
    split) are ready after the end.

    If the block raises, nothing queued in the group is run.

    simulate=True ends with ncclGroupSimulateEnd: nothing runs, and the
    group's `estimated_time` (microseconds) is the library's prediction.
    """
    return Group(simulate=simulate)


def simulate() -> Group:
    """Same as group(simulate=True)."""
    return Group(simulate=True)
