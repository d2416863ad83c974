"""device/lowp.h (float16, bfloat16, fp8 e4m3fn / e5m2 conversions and
reduction operators) against ml_dtypes/numpy and NVIDIA NCCL's semantics.

Builds tests/cpp/lowp_dump.cc with the C++ compiler directly (no CMake).
Where ml_dtypes and CUDA differ, CUDA/NCCL wins (docs/datatypes.md):
  * fp8 from float: NCCL (the __nv_fp8_* constructors) uses __NV_SATFINITE:
    overflow *and +-inf* -> +-max finite (e4m3 448, e5m2 57344); ml_dtypes
    gives NaN (e4m3fn) / inf (e5m2), which is __NV_NOSAT (tested too).
  * NaN results are canonical: 0x7fff (half, bf16), 0x7f (fp8); ml_dtypes keeps
    sign/payload. NaN-ness is compared against ml_dtypes, the bits are asserted.
  * fp8 ops are computed in half (NCCL sm_90): exact -> RNE half -> satfinite
    fp8; max/min follow __hmax/__hmin (NaN ignored, +0 > -0).
"""
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CXX = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

TYPES = {  # name: (numpy dtype, storage uint dtype, canonical NaN, max finite bits)
    "f16": (np.float16, np.uint16, 0x7FFF, 0x7BFF),
    "bf16": (ml_dtypes.bfloat16, np.uint16, 0x7FFF, 0x7F7F),
    "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8, 0x7F, 0x7E),
    "e5m2": (ml_dtypes.float8_e5m2, np.uint8, 0x7F, 0x7B),
}


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    exe = tmp_path_factory.mktemp("lowp") / "lowp_dump"
    subprocess.run([CXX, "-std=c++17", "-O2", "-Wall", "-Werror", f"-I{ROOT / 'src'}", f"-I{ROOT / 'include'}",
                    str(ROOT / "tests" / "cpp" / "lowp_dump.cc"), "-o", str(exe)], check=True, timeout=120)

    def run(*args, data=None, text=False):
        p = subprocess.run([str(exe), *args], input=data, capture_output=True, timeout=60, check=True)
        return p.stdout.decode() if text else p.stdout

    return run


def decode(name, bits):
    dt, ut, _, _ = TYPES[name]
    return np.asarray(bits, dtype=ut).view(dt)


def encodings(name):
    ut = TYPES[name][1]
    return np.arange(np.iinfo(ut).max + 1, dtype=np.uint32).astype(ut)


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def assert_bits_equal(name, got, want, what, signed_nan=False):
    """Bit equality; NaN results must be the canonical NaN (signed_nan: or its negative) and `want`
    must be NaN there too."""
    dt, ut, cnan, _ = TYPES[name]
    got = np.asarray(got, dtype=ut)
    want = np.asarray(want, dtype=ut)
    gnan = np.isnan(got.view(dt).astype(np.float32))
    wnan = np.isnan(want.view(dt).astype(np.float32))
    assert np.array_equal(gnan, wnan), f"{what}: NaN-ness differs at {np.flatnonzero(gnan != wnan)[:8]}"
    sign = 1 << (8 * got.itemsize - 1)
    ok = (got[gnan] & ~ut(sign if signed_nan else 0)) == cnan
    assert np.all(ok), f"{what}: non-canonical NaN {np.unique(got[gnan])[:8]}"
    bad = np.flatnonzero((got != want) & ~gnan)
    assert bad.size == 0, f"{what}: {bad.size} mismatches, first {[(int(i), hex(got[i]), hex(want[i])) for i in bad[:5]]}"


# ---------------------------------------------------------------------------
# toFloat: every encoding.
@pytest.mark.parametrize("name", list(TYPES))
def test_to_float_every_encoding(dump, name):
    out = np.array([int(x, 16) for x in dump("tofloat", name, text=True).split()], dtype=np.uint32)
    enc = encodings(name)
    assert out.size == enc.size
    want = decode(name, enc).astype(np.float32)
    got = f32(out)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))  # exact, signed zeros included


# ---------------------------------------------------------------------------
# fromFloat: a large input set.
def float_inputs():
    rng = np.random.default_rng(20240607)
    parts = []
    # every value of each type as float32, the midpoints to the next encoding, and +-1 ulp of float32 around them
    for name in TYPES:
        enc = encodings(name)
        nxt_enc = (enc.astype(np.uint32) + 1).astype(enc.dtype)
        with np.errstate(invalid="ignore"):
            v = decode(name, enc).astype(np.float64)
            nxt = decode(name, nxt_enc).astype(np.float64)
        fin = np.isfinite(v)
        parts.append(v[fin].astype(np.float32).view(np.uint32))
        sign = enc.dtype.type(1 << (8 * enc.itemsize - 1))
        step = fin & np.isfinite(nxt) & ((enc & sign) == (nxt_enc & sign))  # neighbours of the same sign
        mid = ((v[step] + nxt[step]) / 2).astype(np.float32)  # exact: the types are narrower than float32
        mb = mid.view(np.uint32)
        parts += [mb, mb + 1, mb - 1]
    # near the overflow thresholds and the largest finite values
    for t in (448.0, 464.0, 480.0, 57344.0, 61440.0, 65504.0, 65520.0, 3.3895313892515355e38, 3.3961775292304e38):
        b = np.array([t], dtype=np.float32).view(np.uint32)[0]
        parts.append(np.arange(b - 64, b + 65, dtype=np.uint32))
    parts.append(np.array([0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x00000001, 0x007FFFFF,
                           0x00800000, 0x33000000, 0x33000001, 0x32FFFFFF, 0x3A800000, 0x3A800001, 0x3A7FFFFF],
                          dtype=np.uint32))
    # random bit patterns (every class: NaN, inf, subnormal, huge), and random values in the narrow types' ranges
    parts.append(rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32))
    parts.append(rng.integers(0, 0x00800000, 1 << 14, dtype=np.uint32))  # float32 subnormals
    parts.append((rng.integers(0x30000000, 0x48000000, 1 << 18, dtype=np.uint32)))  # 2^-31 .. 2^17
    x = np.concatenate(parts).astype(np.uint32)
    return np.concatenate([x, x ^ np.uint32(0x80000000)])  # both signs


@pytest.fixture(scope="module")
def inputs():
    return float_inputs()


def reference_from_float(name, x_bits, saturate=True):
    """ml_dtypes/numpy RNE conversion, with CUDA's __NV_SATFINITE applied for fp8."""
    dt, ut, _, maxbits = TYPES[name]
    x = f32(x_bits)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(dt).view(ut).copy()
    if name in ("e4m3", "e5m2") and saturate:
        wv = want.view(dt).astype(np.float32)
        overflow = ~np.isnan(x) & ~np.isfinite(wv) if name == "e5m2" else ~np.isnan(x) & np.isnan(wv)
        sign = ((x_bits >> 31) << 7).astype(ut)
        want[overflow] = sign[overflow] | ut(maxbits)
    return want


@pytest.mark.parametrize("name", list(TYPES))
def test_from_float(dump, inputs, name):
    ut = TYPES[name][1]
    got = np.frombuffer(dump("fromfloat-bin", name, data=inputs.tobytes()), dtype=ut)
    assert got.size == inputs.size
    assert_bits_equal(name, got, reference_from_float(name, inputs), f"fromFloat<{name}>")


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_from_float_nosat_is_ml_dtypes(dump, inputs, name):
    got = np.frombuffer(dump("fromfloat-bin", name, "nosat", data=inputs.tobytes()), dtype=np.uint8)
    # __NV_NOSAT overflow to NaN (e4m3) keeps the sign: 0x7f | sign, as cuda_fp8.hpp does
    assert_bits_equal(name, got, reference_from_float(name, inputs, saturate=False), f"NoSat<{name}>",
                      signed_nan=True)


def test_cuda_semantics_spot_values(dump):
    def ff(name, value, *extra):
        b = np.array([value], dtype=np.float32).view(np.uint32)[0]
        return int(dump("fromfloat", name, *extra, data=f"{b:08x}".encode(), text=True), 16)

    inf, nan = float("inf"), float("nan")
    # __NV_SATFINITE: overflow and infinity saturate, NaN is canonical 0x7f (sign dropped)
    assert [ff("e4m3", v) for v in (448, 464, 465, 1e30, inf, -inf, nan, -nan)] == \
        [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x7F]
    assert [ff("e5m2", v) for v in (57344, 61439, 61440, inf, -inf, nan)] == [0x7B, 0x7B, 0x7B, 0x7B, 0xFB, 0x7F]
    # __NV_NOSAT
    assert [ff("e4m3", v, "nosat") for v in (464, 465, inf)] == [0x7E, 0x7F, 0x7F]
    assert [ff("e5m2", v, "nosat") for v in (61439, 61440, -inf)] == [0x7B, 0x7C, 0xFC]
    assert [ff("f16", v) for v in (65519, 65520, -inf, nan, -0.0)] == [0x7BFF, 0x7C00, 0xFC00, 0x7FFF, 0x8000]
    assert [ff("bf16", v) for v in (nan, -0.0, 1e-45)] == [0x7FFF, 0x8000, 0x0000]
    assert ff("e4m3", 2.0 ** -10) == 0x00 and ff("e4m3", 2.0 ** -10 * 1.0001) == 0x01  # tie to even / above it


# ---------------------------------------------------------------------------
# Reductions, against a float64 model of NCCL's kernels.
def ref_round(name, r64):
    """How NCCL stores an exact result r64 (exact in float64 for these inputs): half/bf16 RNE;
    fp8: RNE to half, then satfinite fp8."""
    if name in ("f16", "bf16"):
        with np.errstate(over="ignore", invalid="ignore"):
            want = r64.astype(TYPES[name][0]).view(TYPES[name][1]).copy()
        return want
    h = r64.astype(np.float16)  # numpy's double->half is correctly rounded
    return reference_from_float(name, h.astype(np.float32).view(np.uint32))


def ref_select(name, a_bits, b_bits, is_max):
    dt, ut, cnan, _ = TYPES[name]
    with np.errstate(invalid="ignore"):
        a = decode(name, a_bits).astype(np.float64)
        b = decode(name, b_bits).astype(np.float64)
    sa, sb = np.signbit(a), np.signbit(b)
    if is_max:
        pick_a = (a > b) | ((a == b) & (~sa | sb))  # +0 > -0
    else:
        pick_a = (a < b) | ((a == b) & (sa | ~sb))
    pick_a |= np.isnan(b)
    pick_a &= ~np.isnan(a) | np.isnan(b)
    out = np.where(pick_a, a_bits, b_bits).astype(ut)
    out[np.isnan(a) & np.isnan(b)] = cnan
    if name == "e5m2":  # stored through the saturating conversion: inf -> max finite
        inf = (out & 0x7F) == 0x7C
        out[inf] -= 1
    return out


def ref_op(name, op, a_bits, b_bits):
    with np.errstate(invalid="ignore", over="ignore"):
        a = decode(name, a_bits).astype(np.float64)
        b = decode(name, b_bits).astype(np.float64)
        if op == "sum":
            return ref_round(name, a + b)
        if op == "prod":
            return ref_round(name, a * b)
    return ref_select(name, a_bits, b_bits, op == "max")


OPS = ["sum", "prod", "max", "min"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_fp8_ops_all_pairs(dump, name, op):
    got = np.frombuffer(dump("table-bin", name, op), dtype=np.uint8)
    a, b = np.divmod(np.arange(65536, dtype=np.uint32), 256)
    assert_bits_equal(name, got, ref_op(name, op, a.astype(np.uint8), b.astype(np.uint8)), f"{op}<{name}>")


def pairs16():
    rng = np.random.default_rng(7)
    special = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00,
                        0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x0080, 0x007F,
                        0x3F80, 0xBF80], dtype=np.uint16)
    sa, sb = np.meshgrid(special, special)
    a = np.concatenate([sa.ravel(), rng.integers(0, 65536, 400000).astype(np.uint16)])
    b = np.concatenate([sb.ravel(), rng.integers(0, 65536, 400000).astype(np.uint16)])
    # near-cancellation and equal-exponent sums
    c = rng.integers(0, 65536, 50000).astype(np.uint16)
    a = np.concatenate([a, c, c])
    b = np.concatenate([b, c ^ np.uint16(0x8000), (c + rng.integers(-3, 4, c.size)).astype(np.uint16)])
    return a, b


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_16bit_ops(dump, name, op):
    a, b = pairs16()
    data = np.stack([a, b], axis=1).astype(np.uint16).tobytes()
    got = np.frombuffer(dump("pairs-bin", name, op, data=data), dtype=np.uint16)
    assert_bits_equal(name, got, ref_op(name, op, a, b), f"{op}<{name}>")


@pytest.mark.parametrize("name", list(TYPES))
def test_premulsum(dump, name):
    """NCCL: preOp rounds local*scalar to T, then FuncSum adds the partial: T(T(x*s) + y)."""
    ut = TYPES[name][1]
    rng = np.random.default_rng(3)
    hi = np.iinfo(ut).max + 1
    for s in rng.integers(0, hi, 6).tolist() + [0]:
        x = rng.integers(0, hi, 50000).astype(ut)
        y = rng.integers(0, hi, 50000).astype(ut)
        got = np.frombuffer(dump("pairs-bin", name, "premulsum", f"{s:x}", data=np.stack([x, y], 1).tobytes()),
                            dtype=ut)
        sv = decode(name, np.array([s], dtype=ut)).astype(np.float64)[0]
        with np.errstate(invalid="ignore", over="ignore"):
            pre = ref_round(name, decode(name, x).astype(np.float64) * sv)
            want = ref_round(name, decode(name, pre).astype(np.float64) + decode(name, y).astype(np.float64))
        assert_bits_equal(name, got, want, f"premulsum<{name}> s={s:#x}")


@pytest.mark.parametrize("name", list(TYPES))
def test_avg_scalar(dump, name):
    """ncclAvg on floating types is PreMulSum by T(float(1.0/nRanks)) (NCCL hostToDevRedOp)."""
    for n in range(1, 17):
        got = int(dump("avgscalar", name, str(n), text=True), 16)
        want = reference_from_float(name, np.array([np.float32(1.0 / n)]).view(np.uint32))[0]
        assert got == want, (name, n)
    assert int(dump("avgscalar", "e4m3", "3", text=True), 16) == 0x2B  # 0.34375, not 1/3


def test_reduce_cli_examples(dump):
    r = lambda *a: int(dump("reduce", *a, text=True), 16)  # noqa: E731
    assert r("e4m3", "sum", "7e", "7e") == 0x7E  # 448 + 448 saturates
    assert r("e4m3", "prod", "7e", "7e") == 0x7E  # 200704 overflows half to inf, saturates to 448
    assert r("e5m2", "sum", "7c", "3c") == 0x7B  # inf + 1 -> 57344 (satfinite)
    assert r("e5m2", "max", "7c", "00") == 0x7B
    assert r("e5m2", "sum", "7b", "7b") == 0x7B
    assert r("e4m3", "sum", "7f", "38") == 0x7F  # NaN propagates through sum
    assert r("e4m3", "max", "ff", "38") == 0x38  # but max ignores it
    assert r("e4m3", "min", "ff", "7f") == 0x7F
    assert r("f16", "max", "8000", "0000") == 0x0000 and r("f16", "min", "0000", "8000") == 0x8000
    assert r("f16", "sum", "7c00", "fc00") == 0x7FFF
    assert r("bf16", "sum", "3f80", "3b80") == 0x3F80  # 1 + 2^-8 ties to even
    assert r("e4m3", "premulsum", "38", "38", "30") == 0x3C  # 1*0.5 + 1 = 1.5
