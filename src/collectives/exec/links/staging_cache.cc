// SPDX-License-Identifier: BSD-3-Clause
#include "collectives/exec/links/staging_cache.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace ccl::coll {
namespace {

struct Block {
  void* memory;
  size_t bytes;
};

// One device's blocks no link holds, and its live links.
struct DeviceCache {
  std::vector<Block> kept;
  std::map<void*, size_t> sizes;  // every block handed out, by address
  int links = 0;
  std::function<void(void*)> free;  // the device's synchronous free (for the last link's drop)
};

std::mutex& cacheMutex() {
  static std::mutex m;
  return m;
}
std::map<int, DeviceCache>& caches() {
  static auto* c = new std::map<int, DeviceCache>;  // never destroyed: blocks stay reachable
  return *c;
}

// Alive while a link of the device holds the staging memory; the last one gives the kept
// blocks back to the device.
struct LinkToken {
  int device;
  explicit LinkToken(int d, std::function<void(void*)> free) : device(d) {
    std::lock_guard<std::mutex> lock(cacheMutex());
    DeviceCache& c = caches()[device];
    ++c.links;
    c.free = std::move(free);
  }
  ~LinkToken() {
    std::vector<Block> drop;
    std::function<void(void*)> free;
    {
      std::lock_guard<std::mutex> lock(cacheMutex());
      DeviceCache& c = caches()[device];
      if (--c.links > 0) return;
      drop.swap(c.kept);
      for (const Block& b : drop) c.sizes.erase(b.memory);
      free = c.free;
    }
    for (const Block& b : drop) free(b.memory);  // no link left: no ccl stream can wait
  }
};

void* take(int device, size_t bytes, const std::function<void*(size_t)>& alloc) {
  {
    std::lock_guard<std::mutex> lock(cacheMutex());
    // The smallest kept block that is large enough: a link's flags must not take a block
    // that its staging ring could use.
    DeviceCache& c = caches()[device];
    size_t best = c.kept.size();
    for (size_t i = 0; i < c.kept.size(); ++i)
      if (c.kept[i].bytes >= bytes && (best == c.kept.size() || c.kept[i].bytes < c.kept[best].bytes)) best = i;
    if (best < c.kept.size()) {
      void* p = c.kept[best].memory;
      c.kept.erase(c.kept.begin() + static_cast<long>(best));
      return p;
    }
  }
  void* p = alloc(bytes);
  if (p) {
    std::lock_guard<std::mutex> lock(cacheMutex());
    caches()[device].sizes[p] = bytes;
  }
  return p;
}

void keep(int device, void* p) {
  std::lock_guard<std::mutex> lock(cacheMutex());
  DeviceCache& c = caches()[device];
  c.kept.push_back({p, c.sizes[p]});
}

}  // namespace

StagingMemory reusingStaging(StagingMemory m, int device) {
  auto token = std::make_shared<LinkToken>(device, m.free);
  StagingMemory r;
  r.alloc = [m, device, token](size_t bytes) { return take(device, bytes, m.alloc); };
  r.free = [device, token](void* p) { keep(device, p); };
  r.allocOn = [m, device, token](size_t bytes, Stream& s) {
    return take(device, bytes, [&](size_t b) { return m.allocOn(b, s); });
  };
  r.freeOn = [device, token](void* p, Stream* s) {
    // Kept once the stream has passed the work enqueued so far (a host step: no CUDA call).
    if (s)
      s->enqueue([device, p] { keep(device, p); });
    else
      keep(device, p);
  };
  return r;
}

}  // namespace ccl::coll
