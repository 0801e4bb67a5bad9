// The process-wide set of emulated IPUs and the policy that assigns them to runners.
//
// The device set comes from the environment variable TF_POPEF_DEVICES, read once on first
// use: a comma-separated list of `<ipu_version>[:<count>]`, e.g. "ipu2:4,ipu21:4" (the
// default: four ipu2 and four ipu21 devices, ids in that order). Every device has
// 1472 tiles x 624 KiB = 940,572,672 bytes of memory.
//
// Ownership: a singleton that lives until process exit and owns every Device. Within one
// process the Python module and a TF op share it because both link the same runtime library.
// Thread safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/core/device.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

struct DeviceSpec {
  std::string ipu_version;
  int count = 1;
};

class DeviceManager {
 public:
  static constexpr uint64_t kIpuMemoryBytes = uint64_t{1472} * 624 * 1024;
  static constexpr const char* kEnvVar = "TF_POPEF_DEVICES";
  static constexpr const char* kDefaultDevices = "ipu2:4,ipu21:4";

  // The singleton. Throws Error(kInvalidArgument) naming TF_POPEF_DEVICES if its value is
  // malformed (on every call, so each runner creation reports it).
  static DeviceManager& Get();
  // Parses a device list; `origin` names where the text came from, for messages.
  static std::vector<DeviceSpec> ParseDeviceList(const std::string& text, const std::string& origin);
  static const std::vector<std::string>& SupportedIpuVersions();

  size_t device_count() const { return devices_.size(); }
  Device& device(int id) const { return *devices_.at(static_cast<size_t>(id)); }
  int runner_count(int id) const;

  // Picks a device for `exe` and registers one more runner on it.
  // device_id >= 0: that device (kInvalidArgument if it does not exist; kFailedPrecondition
  // if its IPU version differs from the executable's). device_id == -1: a device that already
  // holds this executable, else an idle compatible device, else the compatible device shared
  // by the fewest runners; kFailedPrecondition if none is compatible. kFailedPrecondition
  // when weights + arena exceed the device memory.
  Device& Acquire(const Executable& exe, int device_id);
  // Undoes one Acquire.
  void Release(const Device& device);

 private:
  explicit DeviceManager(const std::vector<DeviceSpec>& specs);
  std::string ListDevices() const;
  void CheckMemory(const Executable& exe, const Device& d) const;

  std::vector<std::unique_ptr<Device>> devices_;
  mutable std::mutex mu_;
  std::vector<int> runners_;  // per device, guarded by mu_
};

}  // namespace tfpopef
