// tf_popef_op.runtime._runtime: Python bindings of the emulator runtime.
//
// Only wraps: converts numpy arrays to HostTensors and back, releases the GIL while the
// runtime works or waits, keeps caller arrays alive until their request completes, and maps
// tfpopef::Error to Python exceptions in one place (error_translation.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/core/device_manager.h"
#include "tf_popef_op/runtime/cc/core/model_runner.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/python/error_translation.h"
#include "tf_popef_op/runtime/cc/python/numpy_tensors.h"

namespace py = pybind11;

namespace tfpopef {
namespace python {
namespace {

std::string PyRepr(const py::handle& h) { return py::repr(h).cast<std::string>(); }

std::string ListRepr(const std::vector<int64_t>& v) { return ShapeToString(v); }

// --- RuntimeConfig ---------------------------------------------------------------------

int64_t TimeoutNs(const py::handle& value) {
  // Leaked on purpose (as in numpy_tensors.h): never released after Python finalized.
  static py::object& timedelta = *new py::object(py::module_::import("datetime").attr("timedelta"));
  int64_t ns;
  if (py::isinstance(value, timedelta)) {
    const int64_t days = value.attr("days").cast<int64_t>();
    const int64_t seconds = value.attr("seconds").cast<int64_t>();
    const int64_t micros = value.attr("microseconds").cast<int64_t>();
    ns = ((days * 86400 + seconds) * 1000000 + micros) * 1000;
  } else if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    ns = value.cast<int64_t>();
  } else {
    throw py::type_error("timeout_ns must be an int (nanoseconds) or a datetime.timedelta, got " +
                         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  if (ns < 0) throw py::value_error("timeout_ns must be >= 0, got " + std::to_string(ns));
  return ns;
}

void SetConfigField(RuntimeConfig& c, const std::string& key, const py::handle& value) {
  if (key == "timeout_ns") c.timeout_ns = TimeoutNs(value);
  else if (key == "batching_dim") c.batching_dim = value.cast<uint32_t>();
  else if (key == "validate_io_params") c.validate_io_params = value.cast<bool>();
  else if (key == "ring_buffer_size_multiplier") c.ring_buffer_size_multiplier = value.cast<uint32_t>();
  else if (key == "thread_safe") c.thread_safe = value.cast<bool>();
  else if (key == "device_id") c.device_id = value.cast<int>();
  else if (key == "spin_ns") {
    c.spin_ns = value.cast<int64_t>();
    if (c.spin_ns < 0) throw py::value_error("spin_ns must be >= 0, got " + std::to_string(c.spin_ns));
  }
  else if (key == "profile") c.profile = value.cast<bool>();
  else throw py::type_error("RuntimeConfig has no option '" + key + "'");
}

// --- anchor descriptors ----------------------------------------------------------------

struct AnchorDescriptor {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  std::optional<int> subgraph;  // None: shared by all subgraphs (the fusion index)
  int batch_axis;
  std::vector<std::string> aliases;

  std::string Repr() const {
    std::string aliases_repr = "[";
    for (size_t i = 0; i < aliases.size(); ++i) aliases_repr += (i ? ", '" : "'") + aliases[i] + "'";
    aliases_repr += "]";
    return "AnchorDescriptor(name='" + name + "', shape=" + ListRepr(shape) + ", dtype='" + dtype +
           "', subgraph=" + (subgraph ? std::to_string(*subgraph) : "None") +
           ", batch_axis=" + std::to_string(batch_axis) + ", aliases=" + aliases_repr + ")";
  }
};

std::vector<AnchorDescriptor> Descriptors(const Executable& exe, bool inputs) {
  std::vector<AnchorDescriptor> out;
  for (const Anchor& a : exe.anchors()) {
    if (a.is_input != inputs) continue;
    out.push_back(AnchorDescriptor{a.name, a.desc.shape, DTypeName(a.desc.dtype),
                                   a.subgraph >= 0 ? std::optional<int>(a.subgraph) : std::nullopt, a.batch_axis,
                                   a.aliases});
  }
  return out;
}

// --- requests --------------------------------------------------------------------------

// A request's Python-side state: the arrays it reads or fills (kept alive until it is done)
// and the caller's output arrays, returned as they are.
struct PendingRequest {
  std::shared_ptr<Request> request;
  py::list keep_alive;
  py::dict given_outputs;  // anchor name -> the caller's array
};

py::dict Results(const PendingRequest& p) {
  py::dict result;
  for (const Request::Output& o : p.request->outputs()) {
    if (!o.runner_allocated) {
      result[py::str(o.name)] = p.given_outputs[py::str(o.name)];
      continue;
    }
    // The array owns a reference to the request, which owns the buffer.
    auto* owner = new std::shared_ptr<Request>(p.request);
    py::capsule base(owner, [](void* ptr) { delete static_cast<std::shared_ptr<Request>*>(ptr); });
    result[py::str(o.name)] = py::array(ToNumpy(o.dtype), o.shape, o.data, base);
  }
  return result;
}

// Future returned by execute_async.
class Future {
 public:
  explicit Future(PendingRequest p) : p_(std::move(p)) {}
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  // The runtime may still be reading or writing the arrays we keep alive: wait before
  // letting them go.
  ~Future() {
    if (p_.request && !p_.request->Done()) {
      py::gil_scoped_release release;
      p_.request->Wait();
    }
  }

  bool done() const { return p_.request->Done(); }

  bool wait(std::optional<double> timeout) const {
    py::gil_scoped_release release;
    if (!timeout) {
      p_.request->Wait();
      return true;
    }
    const double seconds = *timeout < 0 ? 0 : *timeout;
    return p_.request->WaitFor(std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)));
  }

  py::dict result(std::optional<double> timeout) const {
    if (!wait(timeout))
      throw Error(ErrorCode::kDeadlineExceeded,
                  "the request did not complete within " + std::to_string(*timeout) + " seconds");
    p_.request->ThrowIfFailed();
    return Results(p_);
  }

  // Where the request's time went (Request::Timing), in nanoseconds.
  py::dict timing() const {
    if (!done())
      throw Error(ErrorCode::kFailedPrecondition, "Future.timing(): the request is not done yet (wait() first)");
    const Request::Timing& t = p_.request->timing();
    py::dict d;
    d["queue_ns"] = t.queue_ns();
    d["compute_input_ns"] = t.input_ns;
    d["compute_infer_ns"] = t.infer_ns;
    d["compute_output_ns"] = t.output_ns;
    d["total_ns"] = t.total_ns();
    d["batches"] = t.batches;
    return d;
  }

  std::string repr() const {
    if (!done()) return "<Future pending>";
    return p_.request->error() ? "<Future failed: " + std::string(p_.request->error()->what()) + ">" : "<Future done>";
  }

 private:
  PendingRequest p_;
};

// --- ModelRunner -----------------------------------------------------------------------

class PyModelRunner {
 public:
  PyModelRunner(const py::object& popef, const std::optional<RuntimeConfig>& config) {
    const RuntimeConfig cfg = config.value_or(RuntimeConfig());
    std::shared_ptr<const PopefReader> reader = Read(popef);
    py::gil_scoped_release release;  // prepares kernels and loads the device
    runner_ = std::make_shared<ModelRunner>(std::move(reader), cfg);
  }

  py::dict Execute(const py::dict& inputs, const std::optional<py::dict>& outputs) {
    PendingRequest p = Submit(inputs, outputs, /*wait=*/true);
    p.request->ThrowIfFailed();
    return Results(p);
  }

  std::unique_ptr<Future> ExecuteAsync(const py::dict& inputs, const std::optional<py::dict>& outputs) {
    return std::make_unique<Future>(Submit(inputs, outputs));
  }

  std::vector<AnchorDescriptor> Inputs() const { return Descriptors(runner_->executable(), true); }
  std::vector<AnchorDescriptor> Outputs() const { return Descriptors(runner_->executable(), false); }

  py::dict Stats() const {
    const RunnerStats s = runner_->stats();
    const DeviceStats d = runner_->device().stats();
    py::dict out;
    out["requests"] = s.requests;
    out["rows"] = s.rows;
    out["failed_requests"] = s.failed_requests;
    out["batches_run"] = s.batches_run;
    out["padded_rows"] = s.padded_rows;
    out["zero_copy_batches"] = s.zero_copy_batches;
    out["staged_batches"] = s.staged_batches;
    out["multi_request_batches"] = s.multi_request_batches;
    out["device_id"] = runner_->device().id();
    out["load_count"] = d.load_count;
    out["reload_count"] = d.reload_count;
    out["total_load_ns"] = d.total_load_ns;
    out["last_load_ns"] = d.last_load_ns;
    out["mapped_weights_bytes"] = runner_->session().mapped_weights_bytes();
    out["copied_weights_bytes"] = runner_->session().copied_weights_bytes();
    return out;
  }

  // One dict per kernel step that ran while profiling (program order).
  py::list Profile() const {
    SessionProfile prof;
    {
      py::gil_scoped_release release;  // waits for the device lock
      prof = runner_->Profile();
    }
    py::list out;
    for (const StepProfile& s : prof.steps) {
      py::dict d;
      d["program"] = s.program;
      d["step"] = s.step;
      d["op"] = s.op;
      d["node"] = s.node;
      d["calls"] = s.calls;
      d["total_us"] = static_cast<double>(s.total_ns) / 1e3;
      d["mean_us"] = static_cast<double>(s.total_ns) / 1e3 / static_cast<double>(s.calls);
      out.append(d);
    }
    return out;
  }

  // Runs of the Main program while profiling and their total time: run time minus the steps'
  // time is the runtime's own dispatch cost.
  py::dict ProfileSummary() const {
    SessionProfile prof;
    {
      py::gil_scoped_release release;
      prof = runner_->Profile();
    }
    uint64_t kernel_ns = 0, calls = 0;
    for (const StepProfile& s : prof.steps) {
      kernel_ns += s.total_ns;
      calls += s.calls;
    }
    py::dict d;
    d["runs"] = prof.runs;
    d["run_us"] = static_cast<double>(prof.run_ns) / 1e3;
    d["kernel_us"] = static_cast<double>(kernel_ns) / 1e3;
    d["kernel_calls"] = calls;
    d["dispatch_us"] = static_cast<double>(prof.run_ns > kernel_ns ? prof.run_ns - kernel_ns : 0) / 1e3;
    return d;
  }

  void ResetProfile() {
    py::gil_scoped_release release;
    runner_->ResetProfile();
  }
  void SetProfiling(bool on) { runner_->set_profiling(on); }
  bool Profiling() const { return runner_->profiling(); }

  py::list Subgraphs() const {
    const Executable& exe = runner_->executable();
    py::list out;
    for (const Subgraph& sg : exe.subgraphs()) {
      const SubgraphBatching& plan = runner_->batching(sg.index);
      std::vector<std::string> ins, outs;
      for (int a : sg.inputs) ins.push_back(exe.anchors()[a].name);
      for (int a : sg.outputs) outs.push_back(exe.anchors()[a].name);
      py::dict d;
      d["index"] = sg.index;
      d["name"] = sg.name;
      d["program"] = exe.programs()[sg.program].name;
      d["batch_size"] = sg.batch_size;
      d["batch_axis"] = sg.batch_axis;
      d["inputs"] = ins;
      d["outputs"] = outs;
      // How this runner batches it (depends on RuntimeConfig.batching_dim).
      d["batched"] = plan.batched;
      d["dynamic_batch"] = plan.dynamic;
      d["run_batch_size"] = plan.batch;
      d["run_batch_axis"] = plan.axis;
      d["exact_shapes_reason"] = plan.batched ? py::none() : py::cast(plan.exact_reason);
      out.append(d);
    }
    return out;
  }

  const ModelRunner& runner() const { return *runner_; }

  // The runner for another extension module linking the same runtime library (the native
  // KServe front end): a capsule holding a new std::shared_ptr<ModelRunner>, so requests it
  // runs keep the runner alive.
  py::object SharedRunnerCapsule() const {
    auto* shared = new std::shared_ptr<ModelRunner>(runner_);
    PyObject* capsule = PyCapsule_New(shared, kRunnerCapsuleName, [](PyObject* object) {
      delete static_cast<std::shared_ptr<ModelRunner>*>(PyCapsule_GetPointer(object, kRunnerCapsuleName));
    });
    if (capsule == nullptr) {
      delete shared;
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
  }
  static constexpr const char* kRunnerCapsuleName = "tfpopef.ModelRunner.shared_ptr";

  void Close() {
    py::gil_scoped_release release;
    runner_->Close();
  }

  std::string Repr() const {
    const Executable& exe = runner_->executable();
    return "<ModelRunner '" + exe.source() + "' " + exe.ipu_version() + " on device " +
           std::to_string(runner_->device().id()) + ", " + std::to_string(exe.subgraphs().size()) + " subgraph(s)" +
           (runner_->closed() ? ", closed>" : ">");
  }

 private:
  static std::shared_ptr<const PopefReader> Read(const py::object& popef) {
    static py::object& os = *new py::object(py::module_::import("os"));  // leaked, see TimeoutNs
    if (py::isinstance<py::str>(popef) || py::hasattr(popef, "__fspath__")) {
      const std::string path = os.attr("fsdecode")(os.attr("fspath")(popef)).cast<std::string>();
      py::gil_scoped_release release;
      return PopefReader::OpenFile(path);
    }
    py::object data = popef;
    // int has to_bytes() too, but is not a model.
    if (!PyObject_CheckBuffer(popef.ptr()) && !py::isinstance<py::int_>(popef) && py::hasattr(popef, "to_bytes"))
      data = popef.attr("to_bytes")();
    if (!PyObject_CheckBuffer(data.ptr()))
      throw py::type_error("ModelRunner: popef must be a path (str or os.PathLike), a bytes-like object or an object "
                           "with to_bytes(), got " + py::str(py::type::of(popef).attr("__name__")).cast<std::string>());
    Py_buffer view;
    if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
    try {
      auto reader = PopefReader::FromBuffer(view.buf, static_cast<size_t>(view.len));
      PyBuffer_Release(&view);
      return reader;
    } catch (...) {
      PyBuffer_Release(&view);
      throw;
    }
  }

  // Queues the request; with `wait`, also waits for it (one GIL release for both).
  PendingRequest Submit(const py::dict& inputs, const std::optional<py::dict>& outputs, bool wait = false) {
    PendingRequest p;
    std::vector<HostTensor> ins, outs;
    for (const auto& [key, value] : inputs) {
      if (!py::isinstance<py::str>(key)) throw py::type_error("input names must be str, got " + PyRepr(key));
      const std::string name = key.cast<std::string>();
      py::array arr = AsInputArray(value);
      ins.push_back(InputTensor(name, arr));
      p.keep_alive.append(arr);
    }
    if (outputs) {
      for (const auto& [key, value] : *outputs) {
        if (!py::isinstance<py::str>(key)) throw py::type_error("output names must be str, got " + PyRepr(key));
        const std::string name = key.cast<std::string>();
        outs.push_back(OutputTensor(name, value));
        p.keep_alive.append(value);
        const int anchor = runner_->executable().FindAnchor(name);
        if (anchor >= 0) p.given_outputs[py::str(runner_->executable().anchors()[anchor].name)] = value;
      }
    }
    if (runner_->config().thread_safe) {
      py::gil_scoped_release release;  // Enqueue may block while the queues are full
      p.request = runner_->ExecuteAsync(ins, outs);
      if (wait) p.request->Wait(runner_->config().spin_ns);
    } else {
      // Without thread safety the queues allow one producer at a time: keeping the GIL makes
      // concurrent Python callers take turns (the device thread never needs the GIL).
      p.request = runner_->ExecuteAsync(ins, outs);
      if (wait) {
        py::gil_scoped_release release;
        p.request->Wait(runner_->config().spin_ns);
      }
    }
    return p;
  }

  std::shared_ptr<ModelRunner> runner_;
};

// --- DeviceManager ---------------------------------------------------------------------

class PyDeviceManager {
 public:
  PyDeviceManager() : manager_(DeviceManager::Get()) {}

  size_t device_count() const { return manager_.device_count(); }

  py::list Devices() const {
    py::list out;
    for (size_t i = 0; i < manager_.device_count(); ++i) {
      const Device& d = manager_.device(static_cast<int>(i));
      const DeviceStats s = d.stats();
      char hash[17];
      std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(s.loaded_hash));
      py::dict info;
      info["id"] = d.id();
      info["ipu_version"] = d.ipu_version();
      info["memory_bytes"] = d.memory_bytes();
      info["loaded_executable"] = s.has_executable ? py::cast(std::string(hash)) : py::none();
      info["runners"] = manager_.runner_count(d.id());
      info["load_count"] = s.load_count;
      info["reload_count"] = s.reload_count;
      info["total_load_ns"] = s.total_load_ns;
      info["last_load_ns"] = s.last_load_ns;
      out.append(info);
    }
    return out;
  }

 private:
  DeviceManager& manager_;
};

}  // namespace
}  // namespace python
}  // namespace tfpopef

PYBIND11_MODULE(_runtime, m) {
  using namespace tfpopef;
  using namespace tfpopef::python;
  m.doc() = "IPU emulator runtime (C++): ModelRunner, RuntimeConfig, DeviceManager";
  RegisterErrorTranslator();

  m.attr("BATCHING_OFF") = RuntimeConfig::kBatchingOff;
  m.attr("DEVICE_MEMORY_BYTES") = DeviceManager::kIpuMemoryBytes;
  m.def("kernel_ops", [] { return KernelRegistry::Get().Ops(); }, "Sorted names of the ops the emulator has kernels for.");
  m.def("num_threads", [] { return kernels::ThreadPool::Global().num_threads(); },
        "Threads of the process-wide intra-op pool, the calling thread included (TF_POPEF_NUM_THREADS, "
        "default: the number of cores).");

  py::class_<RuntimeConfig>(m, "RuntimeConfig", "Options of a ModelRunner (see runtime_config.h).")
      .def(py::init([](const py::kwargs& kwargs) {
             RuntimeConfig c;
             for (const auto& [key, value] : kwargs) SetConfigField(c, key.cast<std::string>(), value);
             return c;
           }),
           "RuntimeConfig(**options): any option may be given as a keyword.")
      .def_property(
          "timeout_ns", [](const RuntimeConfig& c) { return c.timeout_ns; },
          [](RuntimeConfig& c, const py::object& v) { c.timeout_ns = TimeoutNs(v); },
          "Nanoseconds a batch waits to fill (int ns or datetime.timedelta; reads back as int ns).")
      .def_readwrite("batching_dim", &RuntimeConfig::batching_dim,
                     "Batch axis for dynamic batching; 0xFFFFFFFF (BATCHING_OFF) disables it.")
      .def_readwrite("validate_io_params", &RuntimeConfig::validate_io_params)
      .def_readwrite("ring_buffer_size_multiplier", &RuntimeConfig::ring_buffer_size_multiplier)
      .def_readwrite("thread_safe", &RuntimeConfig::thread_safe)
      .def_readwrite("device_id", &RuntimeConfig::device_id)
      .def_property(
          "spin_ns", [](const RuntimeConfig& c) { return c.spin_ns; },
          [](RuntimeConfig& c, int64_t v) {
            if (v < 0) throw py::value_error("spin_ns must be >= 0, got " + std::to_string(v));
            c.spin_ns = v;
          },
          "Nanoseconds a waiting thread spins before sleeping (0: never spin).")
      .def_readwrite("profile", &RuntimeConfig::profile,
                     "Per-op profiling (ModelRunner.profile()); default from TF_POPEF_PROFILE.")
      .def("__repr__", &RuntimeConfig::ToString);

  py::class_<AnchorDescriptor>(m, "AnchorDescriptor", "An input or output anchor of a ModelRunner.")
      .def_readonly("name", &AnchorDescriptor::name)
      .def_readonly("shape", &AnchorDescriptor::shape)
      .def_readonly("dtype", &AnchorDescriptor::dtype)
      .def_readonly("subgraph", &AnchorDescriptor::subgraph)
      .def_readonly("batch_axis", &AnchorDescriptor::batch_axis)
      .def_readonly("aliases", &AnchorDescriptor::aliases)
      .def("numpy_data_type", [](const AnchorDescriptor& d) { return py::dtype(d.dtype); })
      .def("__repr__", &AnchorDescriptor::Repr);

  py::class_<Future>(m, "Future", "Result of ModelRunner.execute_async.")
      .def("done", &Future::done)
      .def("wait", &Future::wait, py::arg("timeout") = py::none(),
           "Waits (seconds, None = forever); returns True once the request is done.")
      .def("result", &Future::result, py::arg("timeout") = py::none(),
           "The outputs dict; raises the request's error (DeadlineExceededError on timeout).")
      .def("timing", &Future::timing,
           "Once done: dict(queue_ns, compute_input_ns, compute_infer_ns, compute_output_ns, total_ns, batches). "
           "queue_ns: queued until its first batch started (waiting for the batch to fill included); "
           "compute_*: gathering inputs, running, scattering outputs, of every batch that held its rows "
           "(a shared batch's times count for each of its requests); total_ns: queued until done; "
           "batches: 0 if it never ran.")
      .def("__repr__", &Future::repr);

  py::class_<PyModelRunner>(m, "ModelRunner",
                            "ModelRunner(popef, config=None): runs a PopEF (path, bytes or object with "
                            "to_bytes()) on an emulated IPU.")
      .def(py::init<const py::object&, const std::optional<RuntimeConfig>&>(), py::arg("popef"),
           py::arg("config") = py::none())
      .def("execute", &PyModelRunner::Execute, py::arg("inputs"), py::arg("outputs") = py::none(),
           "Runs one request; fills the given output arrays in place and returns all outputs.")
      .def("execute_async", &PyModelRunner::ExecuteAsync, py::arg("inputs"), py::arg("outputs") = py::none())
      .def("get_execute_inputs", &PyModelRunner::Inputs)
      .def("get_execute_outputs", &PyModelRunner::Outputs)
      .def("stats", &PyModelRunner::Stats)
      .def("profile", &PyModelRunner::Profile,
           "Per kernel step that ran while profiling: dict(program, step, op, node, calls, total_us, mean_us).")
      .def("profile_summary", &PyModelRunner::ProfileSummary,
           "dict(runs, run_us, kernel_us, kernel_calls, dispatch_us) of the runs while profiling.")
      .def("reset_profile", &PyModelRunner::ResetProfile)
      .def_property("profiling", &PyModelRunner::Profiling, &PyModelRunner::SetProfiling,
                    "Whether runs are profiled (initially RuntimeConfig.profile).")
      .def_property_readonly("subgraphs", &PyModelRunner::Subgraphs)
      .def_property_readonly("ipu_version", [](const PyModelRunner& r) { return r.runner().executable().ipu_version(); })
      .def_property_readonly("device_id", [](const PyModelRunner& r) { return r.runner().device().id(); })
      .def_property_readonly("executable_hash", [](const PyModelRunner& r) { return r.runner().executable().hash_hex(); })
      .def_property_readonly("config", [](const PyModelRunner& r) { return r.runner().config(); })
      .def_property_readonly("closed", [](const PyModelRunner& r) { return r.runner().closed(); })
      .def("__runner_capsule__", &PyModelRunner::SharedRunnerCapsule,
           "A PyCapsule 'tfpopef.ModelRunner.shared_ptr' sharing the C++ runner with another extension module.")
      .def("close", &PyModelRunner::Close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyModelRunner& r, const py::args&) {
        r.Close();
        return false;
      })
      .def("__repr__", &PyModelRunner::Repr);

  py::class_<PyDeviceManager>(m, "DeviceManager", "View of the process-wide emulated devices (TF_POPEF_DEVICES).")
      .def(py::init<>())
      .def_property_readonly("device_count", &PyDeviceManager::device_count)
      .def("devices", &PyDeviceManager::Devices)
      .def("__repr__", [](const PyDeviceManager& d) {
        return "<DeviceManager " + std::to_string(d.device_count()) + " devices>";
      });
}
