// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/device.h"

#include <atomic>

namespace ccl::coll {
namespace {
std::atomic<DeviceDriver*> gDriver{nullptr};
}  // namespace

DeviceDriver* deviceDriver() { return gDriver.load(std::memory_order_acquire); }

void setDeviceDriver(DeviceDriver* driver) { gDriver.store(driver, std::memory_order_release); }

}  // namespace ccl::coll
