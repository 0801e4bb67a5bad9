"""Classify, Regress and MultiInference with TF Serving's rules: a classify signature has
outputs `classes` and/or `scores`, a regress signature output `outputs`, each with one
DT_STRING input fed with serialized tf.Examples (a context example is merged into each).
With --enable_signature_method_name_check (process-wide, as in TF Serving) the signature's
method_name must also be tensorflow/serving/classify or tensorflow/serving/regress; off by
default so native TF2 SavedModels (whose signatures all say predict) can serve them."""
import numpy as np
from tensorflow_serving.apis import (classification_pb2, inference_pb2, regression_pb2)

from serving.model_server.errors import invalid_argument

CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
CLASSES, SCORES, OUTPUTS = "classes", "scores", "outputs"
_method_name_check = {"enabled": False}


def set_signature_method_name_check(enabled: bool) -> None:
    _method_name_check["enabled"] = enabled


def serialized_examples(input_proto) -> np.ndarray:
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        examples = list(input_proto.example_list.examples)
    elif kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context
        examples = []
        for example in input_proto.example_list_with_context.examples:
            merged = type(example)()
            merged.CopyFrom(context)
            merged.MergeFrom(example)
            examples.append(merged)
    else:
        examples = []
    if not examples:
        raise invalid_argument("Input is empty.")
    return np.array([e.SerializeToString() for e in examples], dtype=object)


def _signature(servable, signature_name, method):
    key, signature = servable.signature_def(signature_name)
    if _method_name_check["enabled"] and signature.method_name != method:
        raise invalid_argument(f"Expected {'classification' if method == CLASSIFY_METHOD else 'regression'}"
                               f" signature method_name to be {method}. Was: "
                               f"{signature.method_name}")
    if len(signature.inputs) != 1:
        raise invalid_argument("Expected one input Tensor.")
    return key, signature, next(iter(signature.inputs))


def run_classify(servable, signature_name, input_proto):
    """(resolved signature name, ClassificationResult)."""
    key, signature, input_key = _signature(servable, signature_name, CLASSIFY_METHOD)
    if CLASSES not in signature.outputs and SCORES not in signature.outputs:
        raise invalid_argument("Expected classification signature outputs to contain at least "
                               "one of classes or scores.")
    examples = serialized_examples(input_proto)
    outputs = servable.run(key, {input_key: examples})
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    count = len(examples)
    for name, value in ((CLASSES, classes), (SCORES, scores)):
        if value is not None and (value.ndim != 2 or value.shape[0] != count):
            raise invalid_argument(f"Expected Tensor shape: [{count} num_classes] but got "
                                   f"{list(value.shape)} for output '{name}'")
    if classes is not None and scores is not None and classes.shape != scores.shape:
        raise invalid_argument(f"Tensors class and score should match in shape: "
                               f"{list(classes.shape)} vs {list(scores.shape)}")
    result = classification_pb2.ClassificationResult()
    width = (classes if classes is not None else scores).shape[1]
    for row in range(count):
        entry = result.classifications.add()
        for column in range(width):
            item = entry.classes.add()
            if classes is not None:
                label = classes[row, column]
                item.label = label.decode("utf-8", "replace") if isinstance(label, bytes) else str(label)
            if scores is not None:
                item.score = float(scores[row, column])
    return key, result


def run_regress(servable, signature_name, input_proto):
    key, signature, input_key = _signature(servable, signature_name, REGRESS_METHOD)
    if OUTPUTS not in signature.outputs:
        raise invalid_argument("No output Tensor named 'outputs' in the regression signature.")
    examples = serialized_examples(input_proto)
    values = servable.run(key, {input_key: examples})[OUTPUTS]
    count = len(examples)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.shape[0] != count:
        raise invalid_argument(f"Expected output Tensor shape to be either [{count}] or "
                               f"[{count} 1] but got {list(values.shape)}")
    result = regression_pb2.RegressionResult()
    for value in values:
        result.regressions.add().value = float(value)
    return key, result


def _fill(spec, servable, signature):
    spec.name = servable.name
    spec.version.value = servable.version
    spec.signature_name = signature


def classify(manager, request):
    servable = manager.resolve(request.model_spec)
    key, result = run_classify(servable, request.model_spec.signature_name, request.input)
    response = classification_pb2.ClassificationResponse()
    _fill(response.model_spec, servable, key)
    response.result.CopyFrom(result)
    return response


def regress(manager, request):
    servable = manager.resolve(request.model_spec)
    key, result = run_regress(servable, request.model_spec.signature_name, request.input)
    response = regression_pb2.RegressionResponse()
    _fill(response.model_spec, servable, key)
    response.result.CopyFrom(result)
    return response


def multi_inference(manager, request):
    if not request.tasks:
        raise invalid_argument("Tasks field is empty.")
    first = request.tasks[0].model_spec
    seen = set()
    for task in request.tasks:
        if task.model_spec.name != first.name:
            raise invalid_argument("All ModelSpecs in a MultiInferenceRequest must access the "
                                   "same model name.")
        if task.model_spec.WhichOneof("version_choice") != first.WhichOneof("version_choice") \
                or task.model_spec.version != first.version \
                or task.model_spec.version_label != first.version_label:
            raise invalid_argument("ModelSpecs in a MultiInferenceRequest must access the same "
                                   "model version.")
        signature = task.model_spec.signature_name or "serving_default"
        if signature in seen:
            raise invalid_argument(f"Duplicate evaluation of signature: {signature}")
        seen.add(signature)
    servable = manager.resolve(first)
    response = inference_pb2.MultiInferenceResponse()
    for task in request.tasks:
        result = response.results.add()
        if task.method_name == CLASSIFY_METHOD:
            key, classification = run_classify(servable, task.model_spec.signature_name,
                                               request.input)
            result.classification_result.CopyFrom(classification)
        elif task.method_name == REGRESS_METHOD:
            key, regression = run_regress(servable, task.model_spec.signature_name,
                                          request.input)
            result.regression_result.CopyFrom(regression)
        else:
            raise invalid_argument(f"Unsupported signature method_name: {task.method_name}")
        _fill(result.model_spec, servable, key)
    return response
