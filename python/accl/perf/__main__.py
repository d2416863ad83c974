"""``python -m accl.perf <collective> [nccl-tests flags]``.

Started by a launcher (accl.perf's own or mpirun), this process is one rank;
otherwise it starts -np local ranks of itself and waits for them.
"""

from __future__ import annotations

import sys

from . import launcher, options, rendezvous


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = options.parse(argv)
    me = rendezvous.identity()
    if me is None:
        return launcher.launch(argv, opts.nranks, opts.timeout)
    from . import worker  # imports accl's extension only in ranks

    return worker.run(opts, me)


if __name__ == "__main__":
    sys.exit(main())
