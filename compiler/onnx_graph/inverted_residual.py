"""NchwcInvertedResidual (docs/popef.md "Internal ops"): MobileNetV2's inverted-residual block,
expand 1x1 -> depthwise -> project 1x1 [+ X], as one step on the NCHW8c layout, so the runtime
keeps the expanded activation in cache band by band; or, without Wp and Bp, expand 1x1 ->
depthwise only (EfficientNet's MBConv, whose squeeze-and-excite reads the whole depthwise output
before the project). Shared by the internal op's shape inference
(internal_ops.py), the pass that writes it (to_inverted_residual) and its lowering.

  NchwcInvertedResidual(X, We, Be, Wd, Bd[, Wp, Bp]) -> Y
    X [N, Cin/8, H, W, 8]; We, Wp blocked 1x1 NchwcConv weights; Wd depthwise [Cexp/8, KH, KW, 8];
    Be, Bd [Cexp], Bp [Cout]; the depthwise window in kernel_shape / strides / dilations (1) /
    pads; <stage>_activation / <stage>_activation_params per stage (expand, depthwise, project:
    none, Relu, Clip or of the sigmoid family); residual (0/1, project stage only): Y also adds X.
    Without Wp and Bp, Y is the depthwise output D [N, Cexp/8, OH, OW, 8]."""
from typing import Optional, Sequence, Tuple

from compiler.onnx_graph import nchwc

STAGES = ("expand", "depthwise", "project")
# The activations the runtime's tiles apply in registers (float32 and float16 alike).
ACTIVATIONS = ("", "Relu", "Clip", "Sigmoid", "Swish", "HardSigmoid", "HardSwish")


def output_shape(x: Sequence[int], we: Sequence[int], wd: Sequence[int], wp: Optional[Sequence[int]],
                 strides: Sequence[int], pads: Sequence[int], residual: bool) -> Tuple[int, ...]:
    """Y [N, Cout/8, OH, OW, 8] (wp None: no project stage, Y is D [N, Cexp/8, OH, OW, 8]);
    ValueError naming what does not fit."""
    if len(x) != 5 or x[4] != nchwc.BLOCK:
        raise ValueError(f"X {list(x)} is not a blocked tensor [N, C/{nchwc.BLOCK}, H, W, {nchwc.BLOCK}]")
    expand = nchwc.conv_geometry(x, we, 1)
    if expand[3] != (1, 1):
        raise ValueError(f"expand weights We {list(we)} are not 1x1")
    mid = expand[1]
    depthwise = nchwc.conv_geometry((x[0], mid // nchwc.BLOCK) + tuple(x[2:]), wd, mid)
    kernel = depthwise[3]
    if len(strides) != 2 or len(pads) != 4 or min(strides) < 1 or min(pads) < 0:
        raise ValueError(f"strides {list(strides)} and pads {list(pads)} must be 2 values >= 1 and 4 values >= 0")
    oh, ow = nchwc.conv_output_dims(x[2:4], kernel, strides, (1, 1), pads)
    if oh < 1 or ow < 1:
        raise ValueError(f"the depthwise window {list(kernel)} leaves an empty output [{oh}, {ow}]")
    if wp is None:
        if residual:
            raise ValueError("residual = 1 needs the project stage (Wp, Bp)")
        return (x[0], mid // nchwc.BLOCK, oh, ow, nchwc.BLOCK)
    project = nchwc.conv_geometry((x[0], mid // nchwc.BLOCK, oh, ow, nchwc.BLOCK), wp, 1)
    if project[3] != (1, 1):
        raise ValueError(f"project weights Wp {list(wp)} are not 1x1")
    y = (x[0], project[1] // nchwc.BLOCK, oh, ow, nchwc.BLOCK)
    if residual and tuple(y) != tuple(x):
        raise ValueError(f"residual = 1 adds X {list(x)} to Y {list(y)}: they must have the same shape")
    return y
