"""Ends a rank that outlives the run's deadline or loses its launcher.

Runs as a daemon thread; the GIL is released inside every blocking library
call, so it fires even while the main thread waits on a peer.
"""

from __future__ import annotations

import os
import sys
import threading
import time

EXIT_TIMEOUT = 124


def start(rank: int, deadline: float | None, watch_parent: bool) -> None:
    """Exit with EXIT_TIMEOUT after `deadline` (time.time()), or when the parent dies."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.2)
            if deadline is not None and time.time() > deadline:
                reason = "passed the run's deadline"
            elif watch_parent and os.getppid() != parent:
                reason = "lost its launcher"
            else:
                continue
            sys.stderr.write(f"accl.perf: rank {rank} {reason}; exiting\n")
            sys.stderr.flush()
            os._exit(EXIT_TIMEOUT)

    threading.Thread(target=watch, name="accl-perf-watchdog", daemon=True).start()
