"""Every lowering rule module; importing this package registers them all."""
from compiler.lowering.rules import (  # noqa: F401
    activations, binary, cast, concat, gemm, matmul, softmax, transpose, views,
)
