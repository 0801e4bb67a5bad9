"""PopRT's Converter: ONNX model in, optimized ONNX ModelProto out (static shapes, constants
folded, optional fp16), ready for lowering."""
from typing import Dict, List, Optional, Sequence

import onnx
from onnx import version_converter

from compiler.converter.context import PassContext
from compiler.converter.pipeline import resolve_pipeline, run_passes
from compiler.errors import ConversionError
from compiler.frontends.model_loading import ModelSource, load_model
from compiler.onnx_graph.graph_edit import opset_version


class Converter:
    """Converter(input_shape={"X": [4, 2]}, precision="fp16", batch_size=4).convert(model).

    After convert(), `passes_run` lists the passes in the order they ran.
    """

    def __init__(self,
                 input_shape: Optional[Dict[str, List[int]]] = None,
                 precision: str = "fp32",
                 batch_size: Optional[int] = None,
                 batch_axis: Optional[int] = None,
                 max_tensor_size: int = -1,
                 max_input_bytes: Optional[int] = None,
                 used_passes: Optional[Sequence[str]] = None,
                 skip_passes: Optional[Sequence[str]] = None,
                 convert_version: Optional[int] = None,
                 model_name: Optional[str] = None,
                 logger=None,
                 signature_name: Optional[str] = None):
        self.ctx_args = dict(input_shape=dict(input_shape or {}), precision=precision, batch_size=batch_size,
                             batch_axis=0 if batch_axis is None else batch_axis, max_tensor_size=max_tensor_size,
                             max_input_bytes=max_input_bytes)
        PassContext(**self.ctx_args)  # validates the options now, not at convert()
        self.pipeline = resolve_pipeline(used_passes, skip_passes)
        self.convert_version = convert_version
        self.options = dict(self.ctx_args, convert_version=convert_version, pipeline=list(self.pipeline))
        self.model_name = model_name
        self.signature_name = signature_name  # TensorFlow models only: the SavedModel signature to export
        self.logger = logger
        self.passes_run: List[str] = []

    def convert(self, model: ModelSource) -> onnx.ModelProto:
        # A TensorFlow model is exported straight to convert_version (default 17), so no conversion follows.
        model, name = load_model(model, self.model_name, self.signature_name, self.convert_version)
        ctx = PassContext(model_name=name, **self.ctx_args)
        if self.logger is not None:
            ctx.logger = self.logger
        model = self._normalize(model, name)
        model = run_passes(model, self.pipeline, ctx)
        self.passes_run = list(ctx.passes_run)
        return model

    def _normalize(self, model: onnx.ModelProto, name: str) -> onnx.ModelProto:
        """Always done, whatever passes are selected: target opset, initializers that old models
        also list as graph inputs (constants, never anchors), and a unique name per node so
        errors and the PopEF program can name them."""
        if self.convert_version is not None and self.convert_version != opset_version(model):
            try:
                model = version_converter.convert_version(model, int(self.convert_version))
            except Exception as e:
                raise ConversionError(f"{name}: cannot convert from opset {opset_version(model)} to "
                                      f"{self.convert_version}: {str(e).strip()}") from None
        graph = model.graph
        initializers = {t.name for t in graph.initializer}
        if any(i.name in initializers for i in graph.input):
            kept = [i for i in graph.input if i.name not in initializers]
            del graph.input[:]
            graph.input.extend(kept)
        if model.ir_version < 4:  # IR < 4 requires initializers to be inputs; 4 lifted that
            model.ir_version = 4
        used = {n.name for n in graph.node if n.name}
        for i, node in enumerate(graph.node):
            if not node.name:
                candidate = f"{node.op_type}_{i}"
                while candidate in used:
                    candidate += "_"
                node.name = candidate
                used.add(candidate)
        return model
