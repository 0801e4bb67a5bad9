"""State shared by the passes that rewrite one model in place: its graph, opset, known constant
values, output names and the names already taken, and adding an initializer under a fresh name
(registered as a constant so later matches in the same pass see its value)."""
import numpy as np
import onnx
from onnx import numpy_helper

from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import fresh_name, names_in_use, opset_version


class GraphRewrite:
    def __init__(self, model: onnx.ModelProto, model_name: str):
        self.model, self.graph, self.model_name = model, model.graph, model_name
        self.opset = opset_version(model)
        self.constants = Constants(self.graph, self.opset, model_name)
        self.outputs = {o.name for o in self.graph.output}
        self.taken = names_in_use(self.graph)

    def add_initializer(self, name: str, value: np.ndarray) -> str:
        """Adds `value` as an initializer named `name` (or `name_1`...); returns the name used."""
        name = fresh_name(name, self.taken)
        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        self.constants.add(name, value)
        return name
