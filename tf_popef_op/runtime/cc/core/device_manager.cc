#include "tf_popef_op/runtime/cc/core/device_manager.h"

#include <algorithm>
#include <cstdlib>

namespace tfpopef {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

constexpr int kMaxDevicesPerEntry = 64;

}  // namespace

const std::vector<std::string>& DeviceManager::SupportedIpuVersions() {
  static const std::vector<std::string> versions = {"ipu2", "ipu21"};
  return versions;
}

std::vector<DeviceSpec> DeviceManager::ParseDeviceList(const std::string& text, const std::string& origin) {
  const std::string syntax = " (expected a comma-separated list of <ipu_version>[:<count>], e.g. \"" +
                             std::string(kDefaultDevices) + "\"; versions: ipu2, ipu21)";
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArgument, origin + "=\"" + text + "\": " + what + syntax);
  };
  std::vector<DeviceSpec> specs;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = Trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) fail("empty entry");
    DeviceSpec spec;
    const size_t colon = item.find(':');
    spec.ipu_version = Trim(item.substr(0, colon));
    const auto& versions = SupportedIpuVersions();
    if (std::find(versions.begin(), versions.end(), spec.ipu_version) == versions.end())
      fail("unknown IPU version '" + spec.ipu_version + "'");
    if (colon != std::string::npos) {
      const std::string count = Trim(item.substr(colon + 1));
      if (count.empty() || count.size() > 4 || count.find_first_not_of("0123456789") != std::string::npos)
        fail("bad device count '" + count + "' in '" + item + "'");
      spec.count = std::stoi(count);
      if (spec.count < 1 || spec.count > kMaxDevicesPerEntry)
        fail("device count " + count + " in '" + item + "' must be 1.." + std::to_string(kMaxDevicesPerEntry));
    }
    specs.push_back(spec);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return specs;
}

DeviceManager& DeviceManager::Get() {
  // A throwing initializer leaves the static uninitialized, so a bad value is reported again
  // by the next call instead of leaving a half-built singleton.
  static DeviceManager* const instance = [] {
    const char* env = std::getenv(kEnvVar);
    const std::string text = env != nullptr ? env : kDefaultDevices;
    return new DeviceManager(ParseDeviceList(text, kEnvVar));  // intentionally never freed
  }();
  return *instance;
}

DeviceManager::DeviceManager(const std::vector<DeviceSpec>& specs) {
  for (const DeviceSpec& s : specs)
    for (int i = 0; i < s.count; ++i)
      devices_.push_back(std::make_unique<Device>(static_cast<int>(devices_.size()), s.ipu_version, kIpuMemoryBytes));
  runners_.assign(devices_.size(), 0);
}

int DeviceManager::runner_count(int id) const {
  std::lock_guard<std::mutex> l(mu_);
  return runners_.at(static_cast<size_t>(id));
}

std::string DeviceManager::ListDevices() const {
  std::string s;
  for (const auto& d : devices_) s += (s.empty() ? "" : ", ") + std::to_string(d->id()) + ": " + d->ipu_version();
  return "devices: " + s;
}

void DeviceManager::CheckMemory(const Executable& exe, const Device& d) const {
  if (exe.device_bytes() > d.memory_bytes())
    throw Error(ErrorCode::kFailedPrecondition,
                exe.source() + ": the executable needs " + std::to_string(exe.device_bytes()) +
                    " bytes of device memory (weights " + std::to_string(exe.weights_bytes()) + " + arena " +
                    std::to_string(exe.arena_bytes()) + ") but " + d.Describe() + " has " +
                    std::to_string(d.memory_bytes()) + " bytes");
  // An input or output streams through device memory, so each must fit it on its own; this also
  // refuses absurd anchor shapes before the runner allocates their staging buffers.
  for (const Anchor& a : exe.anchors())
    if (a.desc.nbytes() > d.memory_bytes())
      throw Error(ErrorCode::kFailedPrecondition,
                  exe.source() + ": " + (a.is_input ? "input" : "output") + " anchor '" + a.name + "' (" +
                      DTypeName(a.desc.dtype) + " " + ShapeToString(a.desc.shape) + ") needs " +
                      std::to_string(a.desc.nbytes()) + " bytes but " + d.Describe() + " has " +
                      std::to_string(d.memory_bytes()) + " bytes");
}

Device& DeviceManager::Acquire(const Executable& exe, int device_id) {
  std::lock_guard<std::mutex> l(mu_);
  Device* chosen = nullptr;
  if (device_id >= 0) {
    if (static_cast<size_t>(device_id) >= devices_.size())
      throw Error(ErrorCode::kInvalidArgument, "device_id " + std::to_string(device_id) + " does not exist (" +
                                                   ListDevices() + "; set " + kEnvVar + " to change them)");
    chosen = devices_[device_id].get();
    if (chosen->ipu_version() != exe.ipu_version())
      throw Error(ErrorCode::kFailedPrecondition, "executable built for " + exe.ipu_version() +
                                                      " cannot run on " + chosen->Describe());
  } else if (device_id == -1) {
    std::vector<Device*> compatible;
    for (const auto& d : devices_)
      if (d->ipu_version() == exe.ipu_version()) compatible.push_back(d.get());
    if (compatible.empty())
      throw Error(ErrorCode::kFailedPrecondition, exe.source() + ": no device can run an executable built for " +
                                                      exe.ipu_version() + " (" + ListDevices() + "; set " +
                                                      kEnvVar + " to change them)");
    auto fewest_runners = [&](const std::vector<Device*>& ds) {
      return *std::min_element(ds.begin(), ds.end(),
                               [&](Device* a, Device* b) { return runners_[a->id()] < runners_[b->id()]; });
    };
    std::vector<Device*> holding;
    for (Device* d : compatible)
      if (d->Holds(exe.hash())) holding.push_back(d);
    chosen = !holding.empty() ? fewest_runners(holding) : fewest_runners(compatible);  // idle first: 0 runners
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                "device_id must be -1 (automatic) or a device id, got " + std::to_string(device_id));
  }
  CheckMemory(exe, *chosen);
  ++runners_[chosen->id()];
  return *chosen;
}

void DeviceManager::Release(const Device& device) {
  std::lock_guard<std::mutex> l(mu_);
  int& n = runners_.at(static_cast<size_t>(device.id()));
  if (n > 0) --n;
}

}  // namespace tfpopef
