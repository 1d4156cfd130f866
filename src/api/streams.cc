// SPDX-License-Identifier: BSD-3-Clause
#include "api/streams.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "api/comm.h"

namespace ccl::api {
namespace {

struct Registry {
  std::mutex mutex;
  // Shared with the open groups that hold calls for a stream (holdHostStream).
  std::unordered_map<const void*, std::shared_ptr<coll::HostStream>> live;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: streams may outlive static destructors
  return *r;
}

coll::HostStream* find(cclStream_t stream) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(stream);
  return it == r.live.end() ? nullptr : it->second.get();
}

coll::HostStream* existing(cclStream_t stream, const char* what) {
  CCL_CHECK(stream, cclInvalidArgument, std::string(what) + " is NULL");
  coll::HostStream* s = find(stream);
  CCL_CHECK(s, cclInvalidArgument, std::string(what) + " is not a host stream made by cclHostStreamCreate");
  return s;
}

}  // namespace

bool isHostStream(cclStream_t stream) { return stream && find(stream); }

coll::Stream* findHostStream(cclStream_t stream) { return stream ? find(stream) : nullptr; }

std::shared_ptr<coll::Stream> holdHostStream(const coll::Stream* s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [handle, stream] : r.live)
    if (stream.get() == s) return stream;
  return nullptr;
}

}  // namespace ccl::api

using namespace ccl;

extern "C" {

CCL_API cclResult_t cclHostStreamCreate(cclStream_t* stream) {
  return api::guard(nullptr, "cclHostStreamCreate", [&] {
    CCL_CHECK(stream, cclInvalidArgument, "stream is NULL");
    auto s = std::make_shared<coll::HostStream>();
    cclStream_t handle = reinterpret_cast<cclStream_t>(s.get());
    api::Registry& r = api::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live.emplace(handle, std::move(s));
    *stream = handle;
  });
}

CCL_API cclResult_t cclHostStreamDestroy(cclStream_t stream) {
  return api::guard(nullptr, "cclHostStreamDestroy", [&] {
    if (!stream) return;
    api::existing(stream, "stream");
    std::shared_ptr<coll::HostStream> s;
    {
      api::Registry& r = api::registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      auto it = r.live.find(stream);
      CCL_CHECK(it != r.live.end(), cclInvalidArgument, "stream was destroyed by another thread");
      s = std::move(it->second);
      r.live.erase(it);
    }
    // What is enqueued runs first. An open group of another thread that holds calls for it
    // keeps it until that group's end, which refuses them; this reference's reset then runs
    // nothing and joins the stream's thread, or leaves that to the group's.
    s->synchronize();
    s.reset();
  });
}

CCL_API cclResult_t cclHostStreamSynchronize(cclStream_t stream) {
  cclResult_t failed = cclSuccess;
  std::string message;
  const cclResult_t r = api::guard(nullptr, "cclHostStreamSynchronize", [&] {
    coll::HostStream* s = api::existing(stream, "stream");
    s->synchronize();
    failed = s->takeError(&message);
  });
  if (r != cclSuccess) return r;
  if (failed == cclSuccess) return cclSuccess;
  return api::recordError(nullptr, "cclHostStreamSynchronize", failed, "an operation on the stream failed: " + message);
}

CCL_API cclResult_t cclHostStreamQuery(cclStream_t stream) {
  bool done = false;
  const cclResult_t r = api::guard(nullptr, "cclHostStreamQuery", [&] {
    coll::HostStream* s = api::existing(stream, "stream");
    done = s->reached(s->record());
  });
  return r != cclSuccess ? r : done ? cclSuccess : cclInProgress;
}

}  // extern "C"
