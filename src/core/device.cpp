#include "dfuse/core/device.h"

namespace dfuse {

std::string_view device_kind_name(DeviceKind k) { return k == DeviceKind::cuda ? "cuda" : "host"; }

std::string Device::str() const {
  if (kind == DeviceKind::host) return "host";
  return "cuda:" + std::to_string(index);
}

}  // namespace dfuse
