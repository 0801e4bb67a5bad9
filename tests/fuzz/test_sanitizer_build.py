"""The sanitizer fuzz build's driver (tests/fuzz/sanitizer_build.py) without building anything:
a missing clang is a clear error, and the import root it makes shadows only the built libraries."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import sanitizer_build  # noqa: E402


def test_without_clang_the_build_stops_naming_what_to_install(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(HERE, "sanitizer_build.py"), "--out", str(tmp_path)],
                            env=dict(os.environ, TFPOPEF_FUZZ_CLANG="no-such-clang++"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "'no-such-clang++' not found" in result.stderr
    assert "apt-get install clang libclang-rt-14-dev" in result.stderr
    assert os.listdir(tmp_path) == []


def test_import_root_links_the_python_sources_and_leaves_the_libraries_to_the_build(tmp_path):
    package = tmp_path / "tf_popef_op"
    sanitizer_build._link_python_sources(sanitizer_build.PACKAGE, str(package))
    assert os.path.realpath(package / "__init__.py") == os.path.join(sanitizer_build.PACKAGE, "__init__.py")
    assert os.path.realpath(package / "runtime" / "errors.py") == os.path.join(
        sanitizer_build.PACKAGE, "runtime", "errors.py")
    assert not (package / "runtime").is_symlink()  # holds the sanitized _runtime module
    assert not os.path.lexists(package / "lib")
    assert not [n for n in os.listdir(package / "runtime") if n.endswith(".so")]
