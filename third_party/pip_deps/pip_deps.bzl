"""Repositories for the C++ dependencies that come from pip packages in the project's venv:
TensorFlow's headers and libtensorflow_framework.so.2 (tf.sysconfig), nlohmann_json's headers
and scipy-openblas32's cblas.h + libscipy_openblas.so. No network: each repository symlinks the
installed package's files and writes a BUILD for them.

The Python used to locate them: $TF_POPEF_PYTHON if set, else <workspace>/.venv/bin/python.
"""

def _python(ctx):
    python = ctx.os.environ.get("TF_POPEF_PYTHON", "")
    if not python:
        python = str(ctx.path(Label("@//:WORKSPACE")).dirname) + "/.venv/bin/python"
    return python

def _ask(ctx, code):
    res = ctx.execute([_python(ctx), "-c", code], environment = {"TF_CPP_MIN_LOG_LEVEL": "3"})
    if res.return_code != 0:
        fail("cannot run %s -c %r: %s" % (_python(ctx), code, res.stderr))
    return res.stdout.strip().splitlines()[-1]

def _tensorflow_impl(ctx):
    include = _ask(ctx, "import tensorflow as tf; print(tf.sysconfig.get_include())")
    libdir = _ask(ctx, "import tensorflow as tf; print(tf.sysconfig.get_lib())")
    ctx.symlink(include, "include")
    ctx.symlink(libdir + "/libtensorflow_framework.so.2", "libtensorflow_framework.so")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# TensorFlow's C++ headers from the pip package (what tf.sysconfig.get_compile_flags() gives).
cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**"], exclude = ["include/external/**/*.py"]),
    includes = ["include"],
    defines = ["EIGEN_MAX_ALIGN_BYTES=64", "_GLIBCXX_USE_CXX11_ABI=1"],
)

# libtensorflow_framework.so.2 (its SONAME), the library custom ops link against.
cc_import(
    name = "libtensorflow_framework",
    shared_library = "libtensorflow_framework.so",
)
""")

pip_tensorflow_repository = repository_rule(
    implementation = _tensorflow_impl,
    environ = ["TF_POPEF_PYTHON"],
    local = True,
)

def _nlohmann_json_impl(ctx):
    ctx.symlink(_ask(ctx, "import nlohmann_json; print(nlohmann_json.get_include())"), "include")
    ctx.file("BUILD", """
cc_library(
    name = "nlohmann_json",
    hdrs = glob(["include/nlohmann/**"]),
    includes = ["include"],
    visibility = ["//visibility:public"],
)
""")

pip_nlohmann_json_repository = repository_rule(
    implementation = _nlohmann_json_impl,
    environ = ["TF_POPEF_PYTHON"],
    local = True,
)

def _openblas_impl(ctx):
    ctx.symlink(_ask(ctx, "import scipy_openblas32 as s; print(s.get_include_dir())"), "include")
    ctx.symlink(_ask(ctx, "import scipy_openblas32 as s; print(s.get_lib_dir())") + "/libscipy_openblas.so",
                "libscipy_openblas.so")
    ctx.file("BUILD", """
cc_library(
    name = "openblas",
    hdrs = glob(["include/*.h"]),
    includes = ["include"],
    deps = [":libscipy_openblas"],
    visibility = ["//visibility:public"],
)

cc_import(
    name = "libscipy_openblas",
    shared_library = "libscipy_openblas.so",
)
""")

pip_openblas_repository = repository_rule(
    implementation = _openblas_impl,
    environ = ["TF_POPEF_PYTHON"],
    local = True,
)
