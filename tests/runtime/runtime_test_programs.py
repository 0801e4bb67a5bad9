"""Builds the C++ test programs of tests/runtime/cc against the installed runtime library."""
import os
import subprocess

import nlohmann_json
import scipy_openblas32

import tf_popef_op

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(os.path.abspath(tf_popef_op.__file__))
REPO_ROOT = os.path.dirname(PACKAGE)


def build_test_program(source_name, binary):
    """Compiles tests/runtime/cc/`source_name` into `binary`, linked to libtfpopef_runtime.so."""
    lib = os.path.join(PACKAGE, "lib")
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-pthread",
                    f"-I{REPO_ROOT}", f"-I{nlohmann_json.get_include()}", f"-I{scipy_openblas32.get_include_dir()}",
                    os.path.join(HERE, "cc", source_name), "-o", str(binary),
                    f"-L{lib}", "-ltfpopef_runtime", f"-Wl,-rpath,{lib}"],
                   check=True, timeout=600)
    return str(binary)
