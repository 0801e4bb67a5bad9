// serving.kserve_native._kserve_native: the Python face of the native KServe v2 gRPC front
// end. Python builds the ModelTable (publish), hands over the delegate for everything the
// fast path does not answer, reads the fast path's counters, and starts / stops the server.
// The GIL is held only while converting Python values and while running a delegated call.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "model_table.h"
#include "native_server.h"

namespace py = pybind11;

namespace tfpopef {
namespace kserve {
namespace {

// tf_popef_op.runtime's ModelRunner.__runner_capsule__(): a shared_ptr<ModelRunner> under
// this name (both modules link the one runtime library).
constexpr const char* kRunnerCapsule = "tfpopef.ModelRunner.shared_ptr";

std::shared_ptr<ModelRunner> RunnerOf(const py::handle& runner) {
  py::object capsule = runner.attr("__runner_capsule__")();
  void* pointer = PyCapsule_GetPointer(capsule.ptr(), kRunnerCapsule);
  if (pointer == nullptr) throw py::error_already_set();
  return *static_cast<std::shared_ptr<ModelRunner>*>(pointer);
}

TensorSpec SpecOf(const py::handle& row) {
  auto t = row.cast<py::tuple>();
  return TensorSpec{t[0].cast<std::string>(), t[1].cast<std::string>(), DTypeFromName(t[2].cast<std::string>()),
                    t[3].cast<std::vector<int64_t>>()};
}

class FrontEnd {
 public:
  FrontEnd(py::function delegate, size_t max_message_chars)
      : delegate_(std::move(delegate)),
        server_(std::make_unique<NativeServer>(
            table_, [this](const char* method, const std::string& request, double timeout_s, std::string* response) {
              return CallPython(method, request, timeout_s, response);
            },
            max_message_chars)) {}

  ~FrontEnd() {
    py::gil_scoped_release release;  // delegated calls in flight need the GIL to finish
    server_.reset();
  }

  // {v2 name: (default version or "", {version: entry dict})}; see kserve_native.py.
  void Publish(const py::dict& models) {
    ModelTable::Table table;
    for (const auto& [key, value] : models) {
      const std::string name = key.cast<std::string>();
      auto pair = value.cast<py::tuple>();
      ModelTable::Versions& versions = table[name];
      versions.default_version = pair[0].cast<std::string>();
      for (const auto& [version_key, entry] : pair[1].cast<py::dict>()) {
        const std::string version = version_key.cast<std::string>();
        auto model = std::make_shared<ServedModel>();
        model->model = entry["model"].cast<std::string>();
        model->version = version;
        model->runner = RunnerOf(entry["runner"]);
        for (const auto& row : entry["inputs"]) model->inputs.push_back(SpecOf(row));
        for (const auto& row : entry["outputs"]) model->outputs.push_back(SpecOf(row));
        for (const auto& row : entry["feeds"]) {
          auto t = row.cast<py::tuple>();
          model->feeds.push_back(Feed{t[0].cast<std::string>(), DTypeFromName(t[1].cast<std::string>()),
                                      t[2].cast<std::vector<int64_t>>(), t[3].cast<std::string>()});
        }
        model->batch_axis = entry["batch_axis"].cast<int>();
        model->batch_size = entry["batch_size"].cast<int64_t>();
        model->pack_requests = entry["pack_requests"].cast<bool>();
        model->max_batch_size = entry["max_batch_size"].cast<int64_t>();
        model->max_tensor_bytes = entry["max_tensor_bytes"].cast<int64_t>();
        model->counters = table_.CountersOf(name, version, model->model);
        versions.by_version[version] = std::move(model);
      }
    }
    table_.Publish(std::move(table));
  }

  // One dict per (v2 name, version) the fast path answered requests of.
  py::list Counts() const {
    py::list out;
    for (const ModelTable::CountedModel& m : table_.Counted()) {
      const Counters& c = *m.counters;
      py::dict d;
      d["name"] = m.name;
      d["version"] = m.version;
      d["model"] = m.model;
      d["success"] = c.success.load();
      d["success_ns"] = c.success_ns.load();
      d["fail"] = c.fail.load();
      d["fail_ns"] = c.fail_ns.load();
      d["rows"] = c.rows.load();
      d["queue_ns"] = c.queue_ns.load();
      d["compute_input_ns"] = c.input_ns.load();
      d["compute_infer_ns"] = c.infer_ns.load();
      d["compute_output_ns"] = c.output_ns.load();
      d["last_inference_ms"] = c.last_inference_ms.load();
      py::dict by_code;
      for (int code = 0; code < Counters::kCodes; ++code)
        if (const uint64_t n = c.fail_by_code[code].load()) by_code[py::int_(code)] = n;
      d["fail_by_code"] = by_code;
      out.append(d);
    }
    return out;
  }

  int Start(const std::string& address, int max_concurrent_rpcs, const py::list& channel_arguments,
            const std::optional<py::tuple>& tls) {
    ServerOptions options;
    options.address = address;
    options.max_concurrent_rpcs = max_concurrent_rpcs;
    for (const auto& item : channel_arguments) {
      auto pair = item.cast<py::tuple>();
      if (py::isinstance<py::int_>(pair[1]))
        options.int_arguments.emplace_back(pair[0].cast<std::string>(), pair[1].cast<int>());
      else
        options.string_arguments.emplace_back(pair[0].cast<std::string>(), pair[1].cast<std::string>());
    }
    if (tls)
      options.tls = TlsOptions{(*tls)[0].cast<std::string>(), (*tls)[1].cast<std::string>(),
                               (*tls)[2].cast<std::string>(), (*tls)[3].cast<bool>()};
    py::gil_scoped_release release;
    return server_->Start(options);
  }

  void Stop(double grace_s) {
    py::gil_scoped_release release;
    server_->Stop(grace_s);
  }

 private:
  grpc::Status CallPython(const char* method, const std::string& request, double timeout_s, std::string* response) {
    py::gil_scoped_acquire acquire;
    try {
      py::object timeout = timeout_s < 0 ? py::none() : py::object(py::float_(timeout_s));
      auto answer = delegate_(method, py::bytes(request), timeout).cast<py::tuple>();
      const int code = answer[0].cast<int>();
      if (code != 0) return grpc::Status(static_cast<grpc::StatusCode>(code), answer[1].cast<std::string>());
      *response = answer[2].cast<std::string>();
      return grpc::Status::OK;
    } catch (const std::exception& error) {
      return grpc::Status(grpc::StatusCode::INTERNAL, std::string("delegated ") + method + " failed: " + error.what());
    }
  }

  py::function delegate_;
  ModelTable table_;
  std::unique_ptr<NativeServer> server_;
};

}  // namespace
}  // namespace kserve
}  // namespace tfpopef

PYBIND11_MODULE(_kserve_native, m) {
  using tfpopef::kserve::FrontEnd;
  m.doc() = "KServe v2 gRPC front end in C++ (inference.GRPCInferenceService)";
  py::class_<FrontEnd>(m, "FrontEnd",
                       "FrontEnd(delegate, max_message_chars): delegate(method, request_bytes, timeout_s or None) "
                       "-> (grpc status code int, message, response_bytes).")
      .def(py::init<py::function, size_t>(), py::arg("delegate"), py::arg("max_message_chars"))
      .def("publish", &FrontEnd::Publish, py::arg("models"),
           "Replaces the versions the fast path answers: {v2 name: (default version, {version: entry})}.")
      .def("counts", &FrontEnd::Counts, "Fast-path request counters per (v2 name, version).")
      .def("start", &FrontEnd::Start, py::arg("address"), py::arg("max_concurrent_rpcs"), py::arg("channel_arguments"),
           py::arg("tls") = py::none(), "Starts serving; returns the bound port.")
      .def("stop", &FrontEnd::Stop, py::arg("grace_s"));
}
