"""TF Serving's REST API with the standard library only (no TensorFlow import)."""
import json
import urllib.error
import urllib.request
from typing import Optional


class RestError(RuntimeError):
    """A non-200 answer: the HTTP status and the server's `error` message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def model_path(model: str, version: Optional[int] = None, label: Optional[str] = None) -> str:
    path = f"/v1/models/{model}"
    if version is not None:
        path += f"/versions/{int(version)}"
    elif label is not None:
        path += f"/labels/{label}"
    return path


class RestClient:
    def __init__(self, base_url: str, timeout_s: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                message = json.loads(raw).get("error", raw.decode("utf-8", "replace"))
            except ValueError:
                message = raw.decode("utf-8", "replace")
            raise RestError(error.code, message) from None

    def predict(self, model: str, instances=None, inputs=None, signature: str = "",
                version: Optional[int] = None, label: Optional[str] = None) -> dict:
        """Row (`instances`) or columnar (`inputs`) predict; returns the JSON answer."""
        if (instances is None) == (inputs is None):
            raise ValueError("give exactly one of instances (row format) or inputs (columnar)")
        body = {"instances": instances} if instances is not None else {"inputs": inputs}
        if signature:
            body["signature_name"] = signature
        return self._call("POST", model_path(model, version, label) + ":predict", body)

    def classify(self, model: str, examples, context=None, signature: str = "", **where):
        return self._examples("classify", model, examples, context, signature, **where)

    def regress(self, model: str, examples, context=None, signature: str = "", **where):
        return self._examples("regress", model, examples, context, signature, **where)

    def _examples(self, verb, model, examples, context, signature, version=None, label=None):
        body = {"examples": examples}
        if context is not None:
            body["context"] = context
        if signature:
            body["signature_name"] = signature
        return self._call("POST", model_path(model, version, label) + f":{verb}", body)

    def status(self, model: str, version: Optional[int] = None, label: Optional[str] = None):
        return self._call("GET", model_path(model, version, label))

    def metadata(self, model: str, version: Optional[int] = None, label: Optional[str] = None):
        return self._call("GET", model_path(model, version, label) + "/metadata")
