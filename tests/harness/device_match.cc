// SPDX-License-Identifier: BSD-3-Clause
#include "device_match.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "rank_threads.h"

namespace ccltest {
namespace {

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAlltoAll, kReduce, kGather, kScatter };
const char* nameOf(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "allreduce";
    case Kind::kReduceScatter:
      return "reducescatter";
    case Kind::kAllGather:
      return "allgather";
    case Kind::kBroadcast:
      return "broadcast";
    case Kind::kAlltoAll:
      return "alltoall";
    case Kind::kReduce:
      return "reduce";
    case Kind::kGather:
      return "gather";
    case Kind::kScatter:
      return "scatter";
  }
  return "?";
}

// One call of `k` with `codec` (NULL: uncompressed), on host or device buffers alike.
cclResult_t issue(Kind k, const void* send, void* recv, size_t count, int root, cclComm_t comm, cclStream_t stream,
                  const cclCompression_t* codec, cclFeedback_t fb) {
  switch (k) {
    case Kind::kAllReduce:
      return cclAllReduceEx(send, recv, count, cclFloat32, cclSum, comm, stream, codec, fb);
    case Kind::kReduceScatter:
      return cclReduceScatterEx(send, recv, count, cclFloat32, cclSum, comm, stream, codec, fb);
    case Kind::kAllGather:
      return cclAllGatherEx(send, recv, count, cclFloat32, comm, stream, codec, fb);
    case Kind::kBroadcast:
      return cclBroadcastEx(send, recv, count, cclFloat32, root, comm, stream, codec);
    case Kind::kAlltoAll:
      return cclAlltoAllEx(send, recv, count, cclFloat32, comm, stream, codec);
    case Kind::kReduce:
      return cclReduce(send, recv, count, cclFloat32, cclSum, root, comm, stream);
    case Kind::kGather:
      return cclGather(send, recv, count, cclFloat32, root, comm, stream);
    case Kind::kScatter:
      return cclScatter(send, recv, count, cclFloat32, root, comm, stream);
  }
  return cclInternalError;
}

std::vector<cclComm_t> makeComms(int n, DeviceOps& ops) {
  cclUniqueId id;
  if (cclGetUniqueId(&id) != cclSuccess) throw std::runtime_error("cclGetUniqueId failed");
  std::vector<cclComm_t> comms(n, nullptr);
  expectNoneThrew(runRanks(n, [&](int r) {
    ops.bindThread();
    if (cclCommInitRank(&comms[r], n, id, r) != cclSuccess)
      throw std::runtime_error(std::string("cclCommInitRank: ") + cclGetLastError(nullptr));
  }));
  return comms;
}

}  // namespace

cclCompression_t codecOf(cclCodec_t c) {
  cclCompression_t p = CCL_COMPRESSION_INITIALIZER;
  p.codec = c;
  p.keepRatio = 0.05;
  p.threshold = 15.0f;
  return p;
}

std::vector<float> inputOf(int rank, size_t n, uint32_t salt) {
  std::vector<float> v(n);
  uint32_t x = 2654435761u * static_cast<uint32_t>(rank + 1) + salt;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<float>(static_cast<int32_t>(x >> 8) % 2000) / 97.0f;
  }
  return v;
}

void expectDeviceMatchesHost(int n, DeviceOps& ops, size_t misalign) {
  // Every size compressed, several chunks per call: read when the communicators are made.
  setenv("CCL_CODEC_MIN_BYTES", "0", 1);
  setenv("CCL_CHUNK_BYTES", "8192", 1);
  auto host = makeComms(n, ops), dev = makeComms(n, ops);
  const size_t count = 3001;
  const cclCodec_t codecs[] = {cclCodecNone,    cclCodecInt8, cclCodecInt4,  cclCodecInt2,
                               cclCodecFp8E4m3, cclCodecTopK, cclCodecRandK, cclCodecThreshold};
  const Kind kinds[] = {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather, Kind::kBroadcast,
                        Kind::kAlltoAll,  Kind::kReduce,        Kind::kGather,    Kind::kScatter};
  expectNoneThrew(runRanks(n, [&](int r) {
    ops.bindThread();
    const size_t total = count * static_cast<size_t>(n);
    void* sendBlock = ops.alloc(total * 4 + misalign);
    void* recvBlock = ops.alloc(total * 4 + misalign);
    void* dsend = static_cast<char*>(sendBlock) + misalign;
    void* drecv = static_cast<char*>(recvBlock) + misalign;
    cclStream_t stream = ops.newStream();
    struct Free {
      DeviceOps& ops;
      void *a, *b;
      cclStream_t s;
      ~Free() {
        ops.destroyStream(s);
        ops.release(a);
        ops.release(b);
      }
    } release{ops, sendBlock, recvBlock, stream};
    uint32_t salt = 0;
    std::vector<float> back(total);
    for (Kind k : kinds) {
      const bool compressible = k != Kind::kReduce && k != Kind::kGather && k != Kind::kScatter;
      for (cclCodec_t c : codecs) {
        if (!compressible && c != cclCodecNone) continue;
        const cclCompression_t codec = codecOf(c);
        const std::vector<float> in = inputOf(r, total, ++salt);
        std::vector<float> hrecv(total, -3.f);
        ops.upload(dsend, in.data(), total * 4);
        ops.upload(drecv, hrecv.data(), total * 4);
        const int root = n - 1;
        const std::string what = std::string(nameOf(k)) + " " + cclCodecName(c) + " rank " + std::to_string(r) +
                                 (misalign ? " at +" + std::to_string(misalign) : "");
        if (issue(k, in.data(), hrecv.data(), count, root, host[r], nullptr, &codec, nullptr) != cclSuccess)
          throw std::runtime_error(what + " on host: " + cclGetLastError(nullptr));
        if (issue(k, dsend, drecv, count, root, dev[r], stream, &codec, nullptr) != cclSuccess)
          throw std::runtime_error(what + " on device: " + cclGetLastError(nullptr));
        ops.synchronize(stream);
        cclResult_t async = cclInternalError;
        if (cclCommGetAsyncError(dev[r], &async) != cclSuccess || async != cclSuccess)
          throw std::runtime_error(what + ": asynchronous error " + cclGetErrorString(async) + ": " +
                                   cclGetLastError(dev[r]));
        ops.download(back.data(), drecv, total * 4);
        if (std::memcmp(hrecv.data(), back.data(), total * 4) != 0) {
          size_t i = 0;
          while (hrecv[i] == back[i]) ++i;
          throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(back[i]) +
                                   " on device, " + std::to_string(hrecv[i]) + " on host");
        }
      }
    }
  }));
  expectNoneThrew(runRanks(n, [&](int r) {
    cclCommDestroy(host[r]);
    cclCommDestroy(dev[r]);
  }));
}

}  // namespace ccltest
