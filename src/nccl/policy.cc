// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/policy.h"

#include "api/compression.h"

#include <atomic>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::nccl {
namespace {

std::atomic<CompressedRunner> gRunner{nullptr};

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

Policy loadAndLog() {
  Policy p = parsePolicy();
  CCL_INFO("NCCL face: %s", describePolicy(p).c_str());
  return p;
}

}  // namespace

Policy parsePolicy() {
  CCL_CHECK(config::codecMinBytes() >= 0, cclInvalidArgument, "CCL_CODEC_MIN_BYTES must be >= 0");
  // The communicators' own parser: one reading of each variable, CCL_CODEC=auto included.
  const api::Policy a = api::policyFromEnv(nullptr);
  Policy p;
  p.codec = a.codec.codec;
  p.autoChoice = a.autoChoice;
  for (const codec::Params& c : a.allowed)
    p.allowed += std::string(p.allowed.empty() ? "" : ",") + cclCodecName(c.codec);
  p.minBytes = a.minBytes;
  p.enabled = a.enabled;
  p.feedback = a.autoFeedback;
  return p;
}

const Policy& policy() {
  static const Policy p = loadAndLog();
  return p;
}

void setCompressedRunner(CompressedRunner runner) { gRunner.store(runner); }

bool wantsCompression(const CollCall& call, size_t bytes) {
  const Policy& p = policy();
  return p.codec != cclCodecNone && p.enables(call.kind) && bytes >= p.minBytes && isFloat(call.dtype);
}

bool tryCompressed(const CollCall& call, size_t bytes) {
  CompressedRunner runner = gRunner.load();
  if (!runner || !wantsCompression(call, bytes)) return false;
  return runner(call, policy());
}

std::string describePolicy(const Policy& p) {
  const char* device = gRunner.load() ? "device buffers: the same policy, through the compressed runner"
                                      : "device buffers: uncompressed, through NVIDIA's NCCL";
  if (p.autoChoice)
    return "host buffers: CCL_CODEC=auto: per call shape, uncompressed or " +
           (p.allowed.empty() ? std::string("(no lossy codec allowed)") : p.allowed) +
           ", whichever ccl's cost model prices fastest (ccl's communicator policy); device buffers: uncompressed, "
           "through NVIDIA's NCCL (the choice is made for host buffers only)";
  if (p.codec == cclCodecNone)
    return "compression off (CCL_CODEC=none): every collective runs uncompressed, as NCCL defines it";
  std::string colls;
  for (int c = 0; c < coll::kNumColls; ++c)
    if (p.enables(static_cast<Coll>(c)))
      colls += std::string(colls.empty() ? "" : ",") + coll::collInfo(static_cast<Coll>(c)).name;
  const char* fb = p.feedback == cclFeedbackNone ? "none" : p.feedback == cclFeedbackResidual ? "ef" : "loco";
  const bool shmToo = config::codecShm() == "on";
  std::string exact;
  for (int c = 0; c < coll::kNumColls; ++c)
    if (coll::collInfo(static_cast<Coll>(c)).compressible && !p.enables(static_cast<Coll>(c)))
      exact += std::string(exact.empty() ? "" : ",") + coll::collInfo(static_cast<Coll>(c)).name;
  return std::string("host buffers: codec ") + cclCodecName(p.codec) + " (lossy) on float " +
         (colls.empty() ? "(none)" : colls) + " of >= " + std::to_string(p.minBytes) + " bytes, exact on " +
         (exact.empty() ? "(none)" : exact) + " (CCL_COMPRESS), feedback " + fb +
         (shmToo ? ", also between ranks that share memory (CCL_CODEC_SHM=on)"
                 : ", except on communicators whose ranks all share memory (CCL_CODEC_SHM=auto)") +
         " (ccl's communicator policy); " + device;
}

}  // namespace ccl::nccl
