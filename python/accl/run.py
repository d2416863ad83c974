"""accl-run / python -m accl.run: run a program with ACCL as its NCCL.

    accl-run [--audit] [--print-env] [--] CMD [ARG ...]

The program is exec'd in place (same PID, signals go straight to it) with ACCL's
libnccl.so.2 in front of any other NCCL:

- LD_PRELOAD gets the absolute path of the packaged libnccl.so.2 prepended
  (an existing LD_PRELOAD is kept after it; ours is never listed twice).
  A preloaded object comes before every DT_NEEDED entry and every dlopen of the
  same SONAME, so it wins over an NVIDIA libnccl.so.2 found through a DT_RPATH
  (PyTorch's CUDA wheels), LD_LIBRARY_PATH or the ld.so cache.
- --audit uses LD_AUDIT instead: libaccl_audit.so answers every request for
  libnccl.so.2 / libnccl.so with ours (la_objsearch, rtld-audit(7)), so only
  programs that ask for NCCL load it.
- LD_LIBRARY_PATH gets the package's lib/ folder first, ACCL_RUN=1 marks the
  environment (children and nested accl-run calls see it; the variables are
  composed so that a nested call changes nothing).

Child processes inherit all of this, so `accl-run mpirun -np 2 prog` and
`accl-run torchrun ... train.py` give every local rank ACCL.
"""

from __future__ import annotations

import os
import shlex
import sys

from ._paths import lib_dir, library_path

PROG = "accl-run"
AUDIT_LIB = "libaccl_audit.so"

USAGE = f"usage: {PROG} [--audit] [--print-env] [--] CMD [ARG ...]"

HELP = f"""{USAGE}

Run CMD with ACCL's libnccl.so.2 in front of any other NCCL. CMD replaces this
process (exec), so its PID, exit status and signals are the program's own.

options:
  -h, --help     show this help and exit
  --audit        load ACCL through LD_AUDIT (redirect requests for libnccl.so.2
                 and libnccl.so) instead of LD_PRELOAD
  --print-env    print the variables it would set, as `export VAR=value`
                 lines, and exit (CMD is not needed)
  --             end of options: everything after it is CMD and its arguments

It sets LD_PRELOAD (ACCL's library prepended to any existing value; with
--audit: LD_AUDIT and ACCL_AUDIT_NCCL), LD_LIBRARY_PATH (ACCL's lib folder
first) and ACCL_RUN=1. Child processes inherit them: `{PROG} mpirun -np 2 ./prog`
(no -x needed for local ranks) and `{PROG} torchrun --nproc-per-node 2 train.py`
give every local rank ACCL. With NCCL_DEBUG=VERSION, INFO or TRACE it prints
one line naming the library on stderr before running CMD.
"""


class UsageError(Exception):
    pass


def _split_preload(value: str) -> list[str]:
    # ld.so separates LD_PRELOAD entries with spaces or colons.
    return [p for p in value.replace(":", " ").split() if p]


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _prepend_preload(ours: str, existing: str) -> str:
    rest = [p for p in _split_preload(existing) if not _same_file(p, ours)]
    return ":".join([ours] + rest)


def _prepend_path(ours: str, existing: str) -> str:
    if not existing:
        return ours
    rest = [p for p in existing.split(":") if not (p and _same_file(p, ours))]
    return ":".join([ours] + rest) if rest else ours


def launch_env(environ: dict[str, str] | None = None, audit: bool = False) -> dict[str, str]:
    """The variables accl-run sets (only those), given the current environment."""
    env = os.environ if environ is None else environ
    lib = os.path.abspath(library_path())
    ldir = os.path.abspath(lib_dir())
    out: dict[str, str] = {}
    if audit:
        out["LD_AUDIT"] = _prepend_preload(os.path.join(ldir, AUDIT_LIB), env.get("LD_AUDIT", ""))
        out["ACCL_AUDIT_NCCL"] = lib
    else:
        out["LD_PRELOAD"] = _prepend_preload(lib, env.get("LD_PRELOAD", ""))
    out["LD_LIBRARY_PATH"] = _prepend_path(ldir, env.get("LD_LIBRARY_PATH", ""))
    out["ACCL_RUN"] = "1"
    return out


def _parse(argv: list[str]) -> tuple[dict[str, bool], list[str]]:
    opts = {"audit": False, "print_env": False, "help": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-h", "--help"):
            opts["help"] = True
        elif arg == "--audit":
            opts["audit"] = True
        elif arg == "--print-env":
            opts["print_env"] = True
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"unknown option {arg!r} (put `--` before a command that starts with '-')")
        else:
            break
        i += 1
    return opts, argv[i:]


def _check_libraries(audit: bool) -> None:
    needed = [library_path()] + ([os.path.join(lib_dir(), AUDIT_LIB)] if audit else [])
    for path in needed:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} is missing: reinstall the accl package (pip install .)")


def _debug_wants_line(env) -> bool:
    return env.get("NCCL_DEBUG", "").strip().upper() in ("VERSION", "INFO", "TRACE")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts, cmd = _parse(argv)
    except UsageError as e:
        print(f"{PROG}: {e}\n{USAGE}", file=sys.stderr)
        return 2
    if opts["help"]:
        print(HELP, end="")
        return 0
    audit = opts["audit"]
    new = launch_env(audit=audit)
    if opts["print_env"]:
        for key, value in new.items():
            print(f"export {key}={shlex.quote(value)}")
        return 0
    if not cmd:
        print(f"{PROG}: missing command to run\n{USAGE}", file=sys.stderr)
        return 2
    try:
        _check_libraries(audit)
    except FileNotFoundError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1

    env = dict(os.environ)
    env.update(new)
    if _debug_wants_line(env):
        how = f"LD_AUDIT={new['LD_AUDIT']}" if audit else f"LD_PRELOAD={new['LD_PRELOAD']}"
        print(f"{PROG}: NCCL is ACCL {_version()} ({library_path()}; {how})", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, env)
    except FileNotFoundError:
        print(f"{PROG}: {cmd[0]}: command not found", file=sys.stderr)
        return 127
    except PermissionError as e:
        print(f"{PROG}: {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 126
    except OSError as e:
        print(f"{PROG}: {cmd[0]}: {e.strerror or e}", file=sys.stderr)
        return 126
    return 0  # not reached: execvpe does not return


def _version() -> str:
    # The package is imported by now (accl/__init__ runs before this module);
    # its __version__ is acclGetVersionString() of the packaged library.
    accl = sys.modules.get("accl")
    return getattr(accl, "__version__", "?")


if __name__ == "__main__":
    sys.exit(main())
