"""PopRT's Compiler: ONNX model -> Executable (PopEF bytes). The stages run in one direction:
frontends (load_model) -> converter (ONNX passes) -> kernel fusion (internal ops) -> lowering
(program, memory plan) -> popef_writer (PopEF bytes).

Compiler.compile runs the default converter pipeline first (shape inference, constant folding,
checks...), so an unconverted model compiles too; the passes are idempotent, so a model already
converted by Converter is unchanged by it (precision is left as it is). Compiler.compile_fused
fuses several models into one executable (compiler/fusion).
"""
from typing import Mapping, Optional, Sequence, Union

import onnx
from onnx import helper

from compiler.converter import Converter
from compiler.converter.pipeline import prepare_control_flow_body
from compiler.errors import CompileError
from compiler.executable import Executable
from compiler.frontends.model_loading import ModelSource, load_model
from compiler.fusion import FusionEntry, fuse_models
from compiler.kernel_fusion import apply_kernel_fusion
from compiler.lowering import lower_model
from compiler.lowering.device_memory import available_bytes
from compiler.onnx_graph.type_inference import infer_types
from compiler.options import CompilerOptions
from compiler.popef_writer import emit_popef
from compiler.version import PRODUCER


class Compiler:
    @staticmethod
    def compile(model: ModelSource, outputs: Optional[Sequence[str]] = None,
                options: Optional[CompilerOptions] = None, signature_name: Optional[str] = None,
                convert_version: Optional[int] = None) -> Executable:
        """model: ONNX bytes, a ModelProto, an ONNX file path, a TensorFlow SavedModel folder or a
        `.keras` file; outputs: the tensors to return (the graph's outputs when None).
        signature_name / convert_version: for TensorFlow models, the SavedModel signature to
        export (default serving_default) and the ONNX opset to export to (default 17)."""
        options = (options if options is not None else CompilerOptions()).validate()
        model, name = load_model(model, signature_name=signature_name, tf_opset=convert_version)
        model = select_outputs(model, outputs, name)
        converter = Converter(batch_size=options.batch_size, batch_axis=options.batch_axis,
                              max_tensor_size=options.max_tensor_size, model_name=name,
                              max_input_bytes=available_bytes(options.num_ipus, options.device_memory_bytes),
                              convert_version=convert_version)
        converted = converter.convert(model)
        return compile_converted(converted, options, name, converter.passes_run, converter.options)

    @staticmethod
    def compile_fused(entries: Sequence[Union[FusionEntry, Mapping]],
                      options: Optional[CompilerOptions] = None) -> Executable:
        """Model fusion: one executable whose subgraph i is entries[i], run when the `index`
        input is i. entries: FusionEntry objects or mappings with the YAML entry keys
        (input_model, input_shape, precision, batch_size, batch_axis, name...)."""
        return fuse_models(entries, options)


def compile_converted(model: onnx.ModelProto, options: CompilerOptions, model_name: str = "<model>",
                      passes_run: Sequence[str] = (), converter_options: Optional[dict] = None) -> Executable:
    """Kernel fusion, lowering and PopEF emission of an already converted model (the CLI runs its
    own converter pipeline)."""
    options = options.validate()
    lowered = lower_model(apply_kernel_fusion(model, options, model_name), options, model_name,
                          prepare_control_flow_body)
    compiler_info = {"producer": PRODUCER, "source_model": model_name, "options": options.to_dict(),
                     "converter_options": dict(converter_options or {}), "passes": list(passes_run or [])}
    popef = emit_popef([lowered.graph], [lowered.plan], lowered.weights, options.ipu_version, options.num_ipus,
                       opaques={"compiler": compiler_info})
    return Executable(popef.data)


def select_outputs(model: onnx.ModelProto, outputs: Optional[Sequence[str]], model_name: str) -> onnx.ModelProto:
    """Makes `outputs` the graph's outputs (any tensor of the graph may be chosen)."""
    if outputs is None:
        return model
    if isinstance(outputs, str):
        outputs = [outputs]
    outputs = list(outputs)
    current = [o.name for o in model.graph.output]
    if outputs == current:
        return model
    if not outputs:
        raise CompileError(f"{model_name}: no outputs requested; the model's outputs are {', '.join(current)}")
    graph = model.graph
    known = ({i.name for i in graph.input} | {t.name for t in graph.initializer}
             | {out for n in graph.node for out in n.output if out})
    unknown = [o for o in outputs if o not in known]
    if unknown:
        raise CompileError(f"{model_name}: requested output(s) {', '.join(unknown)} are not tensors of the model; "
                           f"its outputs are {', '.join(current) or '(none)'}")
    declared = {o.name: o for o in graph.output}
    types = None
    new_outputs = []
    for name in outputs:
        if name in declared:
            new_outputs.append(declared[name])
            continue
        types = types or infer_types(model, model_name=model_name).types
        t = types.get(name)
        if t is None:
            raise CompileError(f"{model_name}: cannot determine the type of requested output '{name}'")
        new_outputs.append(helper.make_tensor_value_info(name, t.elem_type, None))
    del graph.output[:]
    graph.output.extend(new_outputs)
    return model
