"""The fuzzers (tests/fuzz, ci/fuzz.sh) for a few seconds each: every input of
their corpus replayed (seeds, and the inputs of past findings), then a short
run under AddressSanitizer and UBSan. Longer runs are a benchmark's job
(`bash ci/fuzz.sh 1800 wire`; docs/design.md, "Measuring and checking"). Skips where clang is not
installed (ci/test.sh installs it)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZERS = ("parsers", "config", "wire", "frames", "gate")


@pytest.mark.timeout(1500)
def test_fuzzers_replay_their_corpus_and_find_nothing(tmp_path):
    if not shutil.which("clang++"):
        pytest.skip("no clang++ (libFuzzer): apt-get install clang")
    env = dict(os.environ, FINDINGS=str(tmp_path / "findings"))
    p = subprocess.run(["bash", str(ROOT / "ci" / "fuzz.sh"), "5", *FUZZERS], capture_output=True, text=True,
                       timeout=1450, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    for name in FUZZERS:
        assert f"fuzz_{name}: 5s, nothing found" in p.stdout, p.stdout[-3000:]
