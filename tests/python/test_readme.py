"""The README's examples, run as a reader would run them: the C program
compiled against the installed library, the Python one as a script."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def block(lang: str, first_line: str) -> str:
    """The README's ```lang block whose first line is `first_line`."""
    for code in re.findall(rf"```{lang}\n(.*?)```", README, re.S):
        if code.splitlines()[0].strip() == first_line:
            return code
    raise AssertionError(f"README has no {lang} block starting {first_line!r}")


@pytest.mark.timeout(120)
def test_readme_c_example_compiles_and_prints_the_sums(accl_paths, tmp_path):
    lib, inc = accl_paths
    src = tmp_path / "allreduce.c"
    src.write_text(block("c", "/* allreduce.c */"))
    exe = tmp_path / "allreduce"
    subprocess.run([os.environ.get("CC", "cc"), f"-I{inc}", str(src), f"-L{lib.parent}", f"-Wl,-rpath,{lib.parent}",
                    "-lnccl", "-o", str(exe)], check=True, timeout=60)
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["11", "22", "33", "44"], p.stdout


@pytest.mark.timeout(120)
def test_readme_python_example_runs_two_processes(tmp_path):
    script = tmp_path / "allreduce2.py"
    script.write_text(block("python", "# allreduce2.py"))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "[3. 3. 3. 3.]\n", p.stdout + p.stderr
