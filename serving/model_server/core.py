"""ServerCore: the one facade protocol handlers call. It owns the ServableManager and the
config-file poller and times every request for metrics; handlers stay thin and stateless."""
import time

from serving.model_server import inference, predictor, rest_json
from serving.model_server.admission import Admission
from serving.model_server.errors import as_serving_error, invalid_argument
from serving.model_server.manager import ServableManager, VersionPoller
from serving.model_server.model_config import (parse_config_text, read_config_text,
                                                single_model_config)


class ServerCore:
    def __init__(self, options, load_servable, metrics=None):
        self.options = options
        self.metrics = metrics
        self.admission = Admission(options.max_queued_requests,
                                   options.max_queued_requests_per_model)
        self.manager = ServableManager(
            load_servable,
            allow_labels_for_unavailable=options.allow_version_labels_for_unavailable_models,
            on_event=metrics.servable_event if metrics else None)
        self._version_poller = VersionPoller(self.manager.reconcile,
                                             options.file_system_poll_wait_seconds,
                                             "file-system-poller")
        self._config_poller = VersionPoller(self._reload_config_file,
                                            options.model_config_file_poll_wait_seconds,
                                            "model-config-file-poller")
        self._config_text = None

    def initial_config(self):
        if self.options.model_config_file:
            self._config_text = read_config_text(self.options.model_config_file)
            return parse_config_text(self._config_text, self.options.model_config_file)
        return single_model_config(self.options.model_name, self.options.model_base_path)

    def start(self) -> None:
        """Loads the initial model set (synchronously, like TF Serving), then starts polling."""
        self.manager.reload_config(self.initial_config())
        self._version_poller.start()
        self._config_poller.start()

    def stop(self) -> None:
        self._config_poller.stop()
        self._version_poller.stop()

    def _reload_config_file(self) -> None:
        text = read_config_text(self.options.model_config_file)
        if text == self._config_text:
            return
        self._config_text = text
        self.reload_config(parse_config_text(text, self.options.model_config_file))

    # ---- requests (each raises ServingError) ---------------------------------------------
    def observe(self, api: str, model_name: str, call, entrypoint: str):
        """Runs call() and records request_count/request_latency for it. REST handlers wrap
        their whole request (JSON parsing included) in it."""
        start = time.perf_counter()
        try:
            result = call()
        except Exception as error:
            failure = as_serving_error(error)
            if self.metrics:
                self.metrics.request_done(api, model_name, failure.code.name,
                                          time.perf_counter() - start, entrypoint)
            raise failure from None
        if self.metrics:
            self.metrics.request_done(api, model_name, "OK", time.perf_counter() - start,
                                      entrypoint)
        return result

    def predict(self, request, entrypoint="GRPC", observed=True):
        if not observed:
            return predictor.predict(self.manager, request)
        return self.observe("predict", request.model_spec.name,
                            lambda: predictor.predict(self.manager, request), entrypoint)

    def get_model_metadata(self, request, entrypoint="GRPC"):
        return self.observe("metadata", request.model_spec.name,
                             lambda: predictor.get_model_metadata(self.manager, request),
                             entrypoint)

    def classify(self, request, entrypoint="GRPC"):
        return self.observe("classify", request.model_spec.name,
                            lambda: inference.classify(self.manager, request), entrypoint)

    def regress(self, request, entrypoint="GRPC"):
        return self.observe("regress", request.model_spec.name,
                            lambda: inference.regress(self.manager, request), entrypoint)

    def multi_inference(self, request, entrypoint="GRPC"):
        name = request.tasks[0].model_spec.name if request.tasks else ""
        return self.observe("multi_inference", name,
                            lambda: inference.multi_inference(self.manager, request), entrypoint)

    def classify_or_regress_json(self, verb, body, model_spec) -> dict:
        """REST :classify / :regress (already inside the REST handler's observe())."""
        signature = body.get("signature_name", "")
        if not isinstance(signature, str):
            raise invalid_argument("'signature_name' must be a string")
        model_spec.signature_name = signature
        servable = self.manager.resolve(model_spec)
        input_proto = rest_json.examples_input(body)
        if verb == "classify":
            _, result = inference.run_classify(servable, signature, input_proto)
            return rest_json.classify_body(result)
        _, result = inference.run_regress(servable, signature, input_proto)
        return rest_json.regress_body(result)

    def get_model_status(self, request):
        return predictor.get_model_status(self.manager, request)

    def signature_input_dtypes(self, model_spec):
        """{input alias: tf.DType} of the signature a REST request names."""
        servable = self.manager.resolve(model_spec)
        specs = servable.input_specs(model_spec.signature_name)
        return {name: spec.dtype for name, spec in specs.items()}

    def reload_config(self, config) -> None:
        self.manager.reload_config(config)
        if self.metrics:
            self.metrics.config_reloaded()

