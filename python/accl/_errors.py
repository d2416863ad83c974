"""The exception hierarchy for failed NCCL calls.

Every failure the C library reports becomes an NcclError subclass chosen by its
ncclResult_t code; the extension builds them through make_error(), which
accl/__init__.py installs as its error factory.
"""

from __future__ import annotations

from ._enums import Result


class NcclError(RuntimeError):
    """A call into libnccl.so.2 failed.

    Attributes:
        code: the ncclResult_t, as accl.Result (a plain int if unknown).
        call: the C function that failed, e.g. "ncclAllReduce" ("" if raised in Python).
        last_warning: the last WARN line of the thread that made the call, right
            after the failure (acclGetThreadLastError; ncclGetLastError is per
            process, so with ranks as threads it may be another rank's).
    """

    def __init__(self, code: int, message: str, *, call: str = "", last_warning: str = ""):
        super().__init__(message)
        try:
            self.code: Result | int = Result(code)
        except ValueError:
            self.code = code
        self.call = call
        self.last_warning = last_warning


class UnhandledCudaError(NcclError):
    """ncclUnhandledCudaError: a CUDA call failed."""


class NcclSystemError(NcclError):
    """ncclSystemError: a system call (socket, memory, ...) failed."""


class InternalError(NcclError):
    """ncclInternalError: an internal check failed."""


class InvalidArgumentError(NcclError, ValueError):
    """ncclInvalidArgument: a bad argument (also a ValueError)."""


class InvalidUsageError(NcclError):
    """ncclInvalidUsage: the call is not allowed here (e.g. on a destroyed communicator)."""


class RemoteError(NcclError):
    """ncclRemoteError: a peer failed or went away."""


class InProgressError(NcclError):
    """ncclInProgress reported where a finished operation was required."""


class NcclTimeoutError(NcclError):
    """ncclTimeout: a deadline passed while waiting for peers."""


_BY_CODE: dict[int, type[NcclError]] = {
    Result.UNHANDLED_CUDA_ERROR: UnhandledCudaError,
    Result.SYSTEM_ERROR: NcclSystemError,
    Result.INTERNAL_ERROR: InternalError,
    Result.INVALID_ARGUMENT: InvalidArgumentError,
    Result.INVALID_USAGE: InvalidUsageError,
    Result.REMOTE_ERROR: RemoteError,
    Result.IN_PROGRESS: InProgressError,
    Result.TIMEOUT: NcclTimeoutError,
}


def error_class(code: int) -> type[NcclError]:
    """The NcclError subclass for an ncclResult_t code (NcclError if unknown)."""
    return _BY_CODE.get(code, NcclError)


def message(code: int, call: str, error_string: str, last_warning: str) -> str:
    """"<call> failed: <what> (code N): <the last WARN>". NCCL's error strings
    end in "(run with NCCL_DEBUG=... for details)": where the details follow,
    that hint goes."""
    if last_warning:
        error_string = error_string.split(" (run with NCCL_DEBUG", 1)[0]
    text = f"{call} failed: {error_string} (code {code})"
    return f"{text}: {last_warning}" if last_warning else text


def make_error(code: int, call: str, error_string: str, last_warning: str) -> NcclError:
    """Build the exception for a failed C call (the extension's error factory)."""
    return error_class(code)(code, message(code, call, error_string, last_warning), call=call,
                             last_warning=last_warning)
