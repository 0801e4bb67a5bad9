"""Every lowering rule module; importing this package registers them all."""
from compiler.lowering.rules import (  # noqa: F401
    activations, binary, cast, concat, gemm, matmul, softmax, transpose, views,
)
from compiler.lowering.rules import (  # noqa: F401  (issue 4 part A: operator coverage)
    conv, data_movement, elementwise_logic, normalization, pool, reduce, resize, static_values,
)
from compiler.lowering.rules import recurrent  # noqa: F401,E402  (LSTM, GRU)
from compiler.lowering.rules import fused_ops  # noqa: F401,E402  (issue 5: FusedConv/FusedGemm/FusedMatMul)
from compiler.lowering.rules import fused_elementwise  # noqa: F401,E402  (issue 5: FusedElementwise)
from compiler.lowering.rules import nchwc  # noqa: F401,E402  (NCHW8c layout: ToNchwc/FromNchwc/NchwcConv/NchwcMaxPool)
