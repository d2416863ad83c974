"""The binary interface: exported names, weak/strong twins, SONAME, header
facts (sizes, offsets, enum values) against NCCL 2.30.7's measured ones."""
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ABI = HERE.parent / "abi"


def dynamic_symbols(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2]] = parts[1]
    return syms


def test_exports_are_exactly_ncclS_plus_accl_extensions(accl_paths):
    lib, _ = accl_paths
    syms = dynamic_symbols(lib)
    expected = set((ABI / "expected_exports.txt").read_text().split())
    names = set(syms)
    assert expected - names == set(), "missing exports"
    extra = {n for n in names - expected if not n.startswith("accl")}
    assert extra == set(), "unexpected exports"


def test_nccl_names_are_weak_aliases_of_strong_pnccl(accl_paths):
    lib, _ = accl_paths
    syms = dynamic_symbols(lib)
    expected = set((ABI / "expected_exports.txt").read_text().split())
    for name in sorted(expected):
        if name.startswith("pnccl"):
            assert syms[name] == "T", name
            assert syms[name[1:]] == "W", name[1:]


def test_soname_and_no_stray_dependencies(accl_paths):
    lib, _ = accl_paths
    dyn = subprocess.run(["readelf", "-d", str(lib)], check=True, capture_output=True, text=True).stdout
    assert "Library soname: [libnccl.so.2]" in dyn
    # cudart is linked statically and libstdc++ too: nothing CUDA or C++ is needed at run time.
    needed = [l for l in dyn.splitlines() if "(NEEDED)" in l]
    assert not any("cudart" in l or "libstdc++" in l for l in needed), needed


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_header_facts_match_nccl_2_30_7(c_program, lang):
    exe = c_program("abi_facts", "c" if lang == "c" else "cxx")
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=30).stdout
    assert out == (ABI / "nccl-2.30.7-abi-facts.txt").read_text()


@pytest.mark.parametrize("flags", [[], ["-DACCL_NO_CUDA_HEADERS"]])
@pytest.mark.parametrize("compiler", [["cc", "-std=c99", "-pedantic"], ["c++", "-x", "c++", "-std=c++17"]])
def test_header_compiles_with_and_without_cuda_headers(accl_paths, tmp_path, compiler, flags):
    _, inc = accl_paths
    src = tmp_path / "use.c"
    src.write_text('#include <nccl.h>\n#include <accl.h>\nint main(void) { ncclComm_t c = 0; (void)c; '
                   'return NCCL_VERSION_CODE == 23007 ? 0 : 1; }\n')
    subprocess.run(compiler + flags + ["-Wall", "-Werror", f"-I{inc}", str(src), "-o", str(tmp_path / "use")],
                   check=True, timeout=60)
    assert subprocess.run([str(tmp_path / "use")]).returncode == 0


def test_every_nccl_function_torch_imports_is_exported(accl_paths):
    # The names torch 2.14.1's libtorch_cuda.so imports (measured from NVIDIA's build).
    lib, _ = accl_paths
    names = set(dynamic_symbols(lib))
    wanted = set((ABI / "torch-2.14.1-imports.txt").read_text().split())
    assert len(wanted) >= 50
    assert wanted - names == set()


def test_installed_torch_cuda_imports_are_exported(accl_paths):
    # Where a CUDA build of torch is installed, read its undefined nccl* symbols directly.
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    libdir = Path(spec.origin).parent / "lib"
    cuda = sorted(libdir.glob("libtorch_cuda*.so"))
    if not cuda:
        pytest.skip("this torch has no libtorch_cuda.so (a CPU build)")
    out = subprocess.run(["nm", "-D", "--undefined-only", str(cuda[0])], check=True, capture_output=True,
                         text=True).stdout
    imported = {l.split()[-1].split("@")[0] for l in out.splitlines() if l.split() and l.split()[-1].startswith("nccl")}
    lib, _ = accl_paths
    assert imported - set(dynamic_symbols(lib)) == set()
