"""Builds tests/runtime/cc/aligned_buffer_test.cc against the runtime library and runs it: device
memory placement (large long-lived buffers on 2 MiB-aligned MADV_HUGEPAGE mappings, small ones
and request outputs on operator new, the silent fallback, zero size, moves, the Device arena)."""
import subprocess

from runtime_test_programs import build_test_program


def test_aligned_buffer_cc(tmp_path):
    binary = build_test_program("aligned_buffer_test.cc", tmp_path / "aligned_buffer_test")
    out = subprocess.run([binary], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all aligned buffer tests passed" in out.stdout
