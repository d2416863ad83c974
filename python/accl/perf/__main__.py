"""``python -m accl.perf <collective> [nccl-tests flags]``.

Started by a launcher (accl.perf's own or mpirun), this process is one rank;
otherwise it starts -np local ranks of itself and waits for them.
"""

from __future__ import annotations

import os
import sys

from . import launcher, options, rendezvous


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = options.parse(argv)
    me = rendezvous.identity()
    peer = os.environ.get("ACCL_PERF_PEER")
    if me is None:
        if not opts.compare:
            return launcher.launch(argv, opts.nranks, opts.timeout)
        from . import compare

        env = dict(os.environ)
        env[compare.ENV_COMPARE] = path = compare.run(argv, opts)
        try:
            return launcher.launch(argv, opts.nranks, opts.timeout, env=env)
        finally:
            import shutil

            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    if peer:
        from . import peers  # a peer library's rank (--compare): no accl extension

        return peers.run(peer, opts, me)
    from . import worker  # imports accl's extension only in ranks

    return worker.run(opts, me)


if __name__ == "__main__":
    sys.exit(main())
