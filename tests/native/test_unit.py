"""The C++ unit tests of internals: parameter parsing and precedence, interface
matching, config read by size/version, host reductions."""
import subprocess


def test_unit_tests_pass(unit_test_binary):
    p = subprocess.run([str(unit_test_binary)], capture_output=True, text=True, timeout=120)
    print(p.stdout, p.stderr)
    assert p.returncode == 0
    assert p.stdout.strip().splitlines()[-1].endswith(" 0 failed")
    assert "FAIL" not in p.stdout
