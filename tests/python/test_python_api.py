"""The accl Python API against the built library, in one process.

These tests need the installed package (pip install .); they fail, not skip,
when accl cannot be imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import accl
from accl import _accl

HOST_MODE = not accl.query_mode()[0]
NATIVE_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                 np.float16, np.float32, np.float64]
OPS = ["sum", "prod", "max", "min", "avg"]

needs_host_mode = pytest.mark.skipif(not HOST_MODE, reason="host arrays need host mode")


def allreduce_or_xfail(comm, *args, **kwargs):
    """comm.allreduce, marking the test xfail where the core refuses the
    (datatype, op) pair as not supported yet (its coverage grows over time)."""
    try:
        return comm.allreduce(*args, **kwargs)
    except accl.InvalidUsageError as e:
        if "not supported" in e.last_warning:
            pytest.xfail(f"core: {e.last_warning}")
        raise


# -- constants and versions --------------------------------------------------
C_NAMES = {
    accl.Result: {"SUCCESS": "ncclSuccess", "UNHANDLED_CUDA_ERROR": "ncclUnhandledCudaError",
                  "SYSTEM_ERROR": "ncclSystemError", "INTERNAL_ERROR": "ncclInternalError",
                  "INVALID_ARGUMENT": "ncclInvalidArgument", "INVALID_USAGE": "ncclInvalidUsage",
                  "REMOTE_ERROR": "ncclRemoteError", "IN_PROGRESS": "ncclInProgress",
                  "TIMEOUT": "ncclTimeout"},
    accl.DataType: {"INT8": "ncclInt8", "UINT8": "ncclUint8", "INT32": "ncclInt32",
                    "UINT32": "ncclUint32", "INT64": "ncclInt64", "UINT64": "ncclUint64",
                    "FLOAT16": "ncclFloat16", "FLOAT32": "ncclFloat32", "FLOAT64": "ncclFloat64",
                    "BFLOAT16": "ncclBfloat16", "FLOAT8E4M3": "ncclFloat8e4m3",
                    "FLOAT8E5M2": "ncclFloat8e5m2"},
    accl.RedOp: {"SUM": "ncclSum", "PROD": "ncclProd", "MAX": "ncclMax", "MIN": "ncclMin",
                 "AVG": "ncclAvg"},
}


@pytest.mark.parametrize("enum", list(C_NAMES), ids=lambda e: e.__name__)
def test_enum_values_match_nccl_h(enum):
    c = _accl.c_constants()
    assert {m.name for m in enum} == set(C_NAMES[enum])
    for py_name, c_name in C_NAMES[enum].items():
        assert enum[py_name] == c[c_name], py_name


def test_documented_enum_values():
    assert [int(r) for r in accl.Result] == list(range(9))
    assert accl.DataType.FLOAT == accl.DataType.FLOAT32 == 7
    assert accl.DataType.HALF == 6 and accl.DataType.BFLOAT16 == 9
    assert accl.RedOp.AVG == 4
    assert accl.UNIQUE_ID_BYTES == 128 == _accl.c_constants()["NCCL_UNIQUE_ID_BYTES"]


def test_versions():
    assert accl.__version__ == importlib.metadata.version("accl")
    code = accl.nccl_version()
    assert isinstance(code, int)
    assert 23000 <= code < 23100  # NCCL API level 2.30.x


def test_params_read_the_environment_and_hide_the_secret():
    """accl.params through ncclParamGetAllParameterKeys/GetParameter, in a
    process whose environment is set here (the library reads it once)."""
    code = (
        "import accl, json\n"
        "p = accl.params\n"
        "try:\n    p['NCCL_NO_SUCH']\nexcept KeyError:\n    missing = True\n"
        "print(json.dumps({'len': len(p), 'keys': list(p), 'buff': p['NCCL_BUFFSIZE'], 'host': p['NCCL_HOSTID'],"
        " 'secret': p['ACCL_SECRET'], 'family': p['NCCL_SOCKET_FAMILY'], 'missing': missing,"
        " 'get': p.get(7, 'no')}))\n"
        "accl.dump_params()\n")
    env = dict(os.environ, NCCL_BUFFSIZE="3M", NCCL_HOSTID="hostB", ACCL_SECRET="hush")
    env.pop("NCCL_SOCKET_FAMILY", None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    import json
    first, *dump = p.stdout.splitlines()
    got = json.loads(first)
    assert got["len"] == len(got["keys"]) >= 20 and "ACCL_TIMEOUT" in got["keys"]
    assert (got["buff"], got["host"], got["secret"], got["family"]) == (str(3 << 20), "hostB", "(hidden)", "")
    assert got["missing"] and got["get"] == "no"
    assert any(l.startswith("NCCL_BUFFSIZE=3M (env)") for l in dump), dump
    assert dump[0].startswith("=== ") and len(dump) == 1 + got["len"]
    assert "hush" not in p.stdout + p.stderr


def test_library_and_headers_are_packaged():
    lib = accl.library_path()
    assert os.path.basename(lib) == "libnccl.so.2" and os.path.isfile(lib)
    assert os.path.samefile(_accl.loaded_library_path(), lib)
    script = os.path.join(os.path.dirname(lib), "libnccl.so")
    with open(script) as f:  # a linker script, not a second copy of the library
        assert "INPUT(libnccl.so.2)" in f.read()
    for header in ("nccl.h", "accl.h"):
        assert os.path.isfile(os.path.join(accl.include_dir(), header))


# -- unique ids and argument errors ------------------------------------------
def test_unique_id_is_128_bytes():
    uid = accl.get_unique_id()
    assert type(uid) is bytes and len(uid) == 128
    assert accl.get_unique_id() != uid


@pytest.mark.timeout(60)
@pytest.mark.parametrize("nranks, rank", [(0, 0), (2, 2), (2, 5), (2, -1), (-3, 0)])
def test_bad_rank_or_size_is_invalid_argument(nranks, rank):
    with pytest.raises(accl.NcclError) as info:
        accl.Communicator(nranks, accl.get_unique_id(), rank)
    err = info.value
    assert err.code == accl.Result.INVALID_ARGUMENT == 4
    assert isinstance(err, accl.InvalidArgumentError) and isinstance(err, ValueError)
    assert isinstance(err.last_warning, str)
    assert err.call.startswith("ncclCommInitRank")


@pytest.mark.parametrize("uid", [b"", b"x" * 127, b"x" * 129, bytearray(64)])
def test_bad_uid_length_is_value_error_before_c(uid):
    with pytest.raises(ValueError, match="128 bytes") as info:
        accl.Communicator(1, uid, 0)
    assert not isinstance(info.value, accl.NcclError)


def test_uid_must_be_bytes():
    with pytest.raises(TypeError, match="fromhex"):
        accl.Communicator(1, accl.get_unique_id().hex(), 0)
    with pytest.raises(TypeError):
        accl.Communicator(1.0, accl.get_unique_id(), 0)


def test_error_hierarchy():
    for code in range(1, 9):
        err = accl._errors.make_error(code, "ncclX", _accl.get_error_string(code), "warn")
        assert isinstance(err, accl.NcclError)
        assert err.code == code and err.last_warning == "warn" and err.call == "ncclX"
        assert "ncclX failed" in str(err) and "warn" in str(err)
    assert isinstance(accl._errors.make_error(4, "f", "", ""), accl.InvalidArgumentError)
    assert isinstance(accl._errors.make_error(5, "f", "", ""), accl.InvalidUsageError)
    assert isinstance(accl._errors.make_error(2, "f", "", ""), accl.NcclSystemError)
    assert isinstance(accl._errors.make_error(8, "f", "", ""), accl.NcclTimeoutError)
    unknown = accl._errors.make_error(99, "f", "?", "")
    assert type(unknown) is accl.NcclError and unknown.code == 99


# -- one rank ----------------------------------------------------------------
def test_single_rank_properties(comm1):
    assert comm1.rank == 0 and comm1.size == 1
    if HOST_MODE:
        assert comm1.device == -1
    assert comm1.async_error() == accl.Result.SUCCESS
    assert not comm1.closed


@needs_host_mode
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_single_rank_allreduce_is_identity(comm1, dtype, op):
    x = (np.arange(24) % 11 + 1).astype(dtype).reshape(2, 3, 4)
    out = allreduce_or_xfail(comm1, x, op=op)
    assert out is not x and out.shape == x.shape and out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@needs_host_mode
def test_allreduce_into_recv_and_in_place(comm1):
    x = np.arange(10, dtype=np.float64)
    recv = np.full(10, -1.0)
    assert comm1.allreduce(x, recv) is recv
    np.testing.assert_array_equal(recv, x)
    y = x.copy()
    assert comm1.allreduce(y, y, accl.RedOp.MAX) is y
    np.testing.assert_array_equal(y, x)
    flat = np.zeros(10)
    comm1.allreduce(x.reshape(2, 5), flat)  # same size, other shape
    np.testing.assert_array_equal(flat, x)
    assert comm1.allreduce(np.zeros(0, np.int32)).size == 0
    scalar = comm1.allreduce(np.array(3.5, np.float32))
    assert scalar.shape == () and scalar == 3.5
    ro = np.arange(4, dtype=np.int32)
    ro.flags.writeable = False
    np.testing.assert_array_equal(comm1.allreduce(ro), ro)  # read-only send is fine


@needs_host_mode
def test_allreduce_rejects_mismatches(comm1):
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError, match="dtype"):
        comm1.allreduce(x, np.zeros(8, np.float64))
    with pytest.raises(ValueError, match="elements"):
        comm1.allreduce(x, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        comm1.allreduce(np.arange(16, dtype=np.float32)[::2])
    with pytest.raises(ValueError, match="contiguous"):
        comm1.allreduce(x, np.zeros(16, np.float32)[::2])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        comm1.allreduce(x, ro)
    with pytest.raises(TypeError, match="NCCL datatype"):
        comm1.allreduce(np.zeros(4, np.complex64))
    with pytest.raises(TypeError, match="NCCL datatype"):
        comm1.allreduce(np.zeros(4, bool))
    with pytest.raises(ValueError, match="reduction op"):
        comm1.allreduce(x, op="mean")
    with pytest.raises(ValueError, match="reduction op"):
        comm1.allreduce(x, op=17)
    with pytest.raises(TypeError):
        comm1.allreduce(x, [0.0] * 8)


@needs_host_mode
def test_allreduce_c_layer_checks_sizes(comm1):
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="needed"):
        _accl.all_reduce(comm1._comm, x, x, 5, int(accl.DataType.FLOAT32), 0)


def test_context_manager_destroys():
    with accl.Communicator(1, accl.get_unique_id(), 0) as comm:
        pass
    assert comm.closed
    comm.destroy()  # idempotent
    comm.abort()


def test_context_manager_aborts_on_error():
    with pytest.raises(KeyError):
        with accl.Communicator(1, accl.get_unique_id(), 0) as comm:
            raise KeyError("boom")
    assert comm.closed


def test_use_after_destroy_is_invalid_usage():
    comm = accl.Communicator(1, accl.get_unique_id(), 0)
    comm.destroy()
    with pytest.raises(accl.InvalidUsageError) as info:
        comm.allreduce(np.zeros(2))
    assert info.value.code == accl.Result.INVALID_USAGE
    with pytest.raises(accl.NcclError) as info:
        comm._comm.count()  # the C++ layer refuses too
    assert info.value.code == 5
    with pytest.raises(accl.InvalidUsageError):
        comm.async_error()


def test_finalize_then_destroy():
    comm = accl.Communicator(1, accl.get_unique_id(), 0)
    comm.finalize()
    with pytest.raises(accl.InvalidArgumentError, match="already finalized"):
        comm.finalize()  # as NCCL: a second finalize is an error
    comm.destroy()
    assert comm.closed


@needs_host_mode
@pytest.mark.parametrize("blocking", [1, 0])
def test_init_with_config(blocking):
    config = {"blocking": blocking, "min_ctas": 1, "max_ctas": 4}
    with accl.Communicator(1, accl.get_unique_id(), 0, config=config) as comm:
        x = np.arange(6, dtype=np.int64)
        np.testing.assert_array_equal(comm.allreduce(x), x)
        comm.finalize()


def test_config_rejects_unknown_field():
    with pytest.raises(ValueError, match="ncclConfig_t field"):
        accl.Communicator(1, accl.get_unique_id(), 0, config={"no_such_field": 1})


@pytest.mark.parametrize("config,match", [
    ({"blocking": "yes"}, "field 'blocking' must be an int, not str"),
    ({"min_ctas": 1.5}, "field 'min_ctas' must be an int, not float"),
    ({"net_name": 3}, "field 'net_name' must be a str, not int"),
    ({1: 1}, "field names are strings"),
])
def test_config_rejects_wrong_types_by_name(config, match):
    # a bare cast raised std::bad_cast, which named neither the field nor the type
    with pytest.raises(TypeError, match=match):
        accl.Communicator(1, accl.get_unique_id(), 0, config=config)


def test_config_rejects_an_int_that_does_not_fit():
    with pytest.raises(ValueError, match="field 'max_ctas' does not fit in a C int"):
        accl.Communicator(1, accl.get_unique_id(), 0, config={"max_ctas": 1 << 40})


@pytest.mark.parametrize("op", [True, False, 1.0, np.float32(0), None, b"sum"])
def test_reduction_op_rejects_flags_floats_and_bytes(comm1, op):
    # True and 1.0 were accepted as PROD, False and 0.0 as SUM
    with pytest.raises(TypeError, match="reduction op must be"):
        comm1.allreduce(np.ones(4, dtype=np.float32), op=op)


def test_reduction_op_accepts_names_enums_and_ints(comm1):
    x = np.arange(4, dtype=np.int32)
    for op in ("prod", accl.RedOp.PROD, 1, np.int64(1)):
        np.testing.assert_array_equal(comm1.allreduce(x, op=op), x)


@pytest.mark.parametrize("scalar,dtype,error", [
    (0.5, np.int32, ValueError),    # truncated to 0 before: a premul_sum that zeroed everything
    (300, np.int8, ValueError),     # wrapped to 44
    (-1, np.uint8, ValueError),     # wrapped to 255
    (True, np.int32, TypeError),
])
def test_premul_sum_refuses_scalars_its_integer_dtype_cannot_hold(comm1, scalar, dtype, error):
    with pytest.raises(error, match="premul_sum scalar"):
        comm1.premul_sum(scalar, dtype)


def test_premul_sum_takes_whole_floats_for_integer_dtypes(comm1):
    x = np.arange(5, dtype=np.int32)
    with comm1.premul_sum(3.0, np.int32) as triple:
        np.testing.assert_array_equal(comm1.allreduce(x, op=triple), 3 * x)


# -- several ranks in one process --------------------------------------------
@needs_host_mode
@pytest.mark.timeout(60)
def test_two_ranks_in_threads_release_the_gil():
    """Init and allreduce block until the peer joins: this only finishes if
    both release the GIL while they wait."""
    uid = accl.get_unique_id()
    results, errors = {}, []

    def rank_main(rank: int) -> None:
        try:
            with accl.Communicator(2, uid, rank) as comm:
                x = np.arange(1000, dtype=np.float32) * (rank + 1)
                results[rank] = comm.allreduce(x)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(50)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "ranks hung (GIL held in a blocking call?)"
    want = np.arange(1000, dtype=np.float32) * 3
    for rank in range(2):
        np.testing.assert_array_equal(results[rank], want)


@needs_host_mode
@pytest.mark.timeout(60)
def test_abort_from_another_thread_stops_a_blocked_allreduce():
    """Rank 1 never joins the allreduce; aborting rank 0 from the main thread
    must end rank 0's wait with an error instead of a hang."""
    uid = accl.get_unique_id()
    comms = {}

    def init(rank: int) -> None:
        comms[rank] = accl.Communicator(2, uid, rank)

    starters = [threading.Thread(target=init, args=(r,), daemon=True) for r in range(2)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(30)
    assert set(comms) == {0, 1}
    outcome = []

    def blocked() -> None:
        try:
            comms[0].allreduce(np.ones(1000, np.float32))
            outcome.append("returned")
        except accl.NcclError as e:
            outcome.append(e)

    waiter = threading.Thread(target=blocked, daemon=True)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), f"allreduce finished without its peer: {outcome}"
    comms[0].abort()
    waiter.join(20)
    assert not waiter.is_alive(), "abort did not wake the blocked allreduce"
    assert len(outcome) == 1 and isinstance(outcome[0], accl.NcclError), outcome
    assert comms[0].closed
    comms[1].abort()


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.timeout(60)
def test_accl_loads_beside_another_libnccl(tmp_path):
    """Another libnccl.so.2 loaded first and global (as `import torch` does with
    NVIDIA's) neither stands in for ACCL's nor stops accl from importing: accl
    calls its own copy, the process's global scope keeps the other one."""
    src = tmp_path / "other.c"
    src.write_text("int ncclGetVersion(int* v) { *v = 22809; return 0; }\n")
    other = tmp_path / "libnccl.so.2"
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", str(src), "-o",
                    str(other)], check=True)
    script = f"""
import ctypes, os, numpy as np
ctypes.CDLL({str(other)!r}, ctypes.RTLD_GLOBAL)
import accl
assert accl.nccl_version() == 23007, accl.nccl_version()
assert os.path.samefile(accl._accl.loaded_library_path(), accl.library_path())
with accl.Communicator(1, accl.get_unique_id(), 0) as c:
    assert (c.allreduce(np.arange(5.0)) == np.arange(5.0)).all()
v = ctypes.c_int()
ctypes.CDLL(None).ncclGetVersion(ctypes.byref(v))
assert v.value == 22809, v.value  # the global scope still has the other library
print("BOTH OK")
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 0 and "BOTH OK" in res.stdout, res.stderr
