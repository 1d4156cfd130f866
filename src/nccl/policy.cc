#include "nccl/policy.h"

#include <strings.h>

#include <atomic>
#include <sstream>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::nccl {
namespace {

constexpr const char* kCollNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                                      "reducescatter", "alltoall",  "gather", "scatter"};
static_assert(sizeof(kCollNames) / sizeof(kCollNames[0]) == static_cast<size_t>(Coll::kCount));

std::atomic<CompressedRunner> gRunner{nullptr};

unsigned parseCollectives(const std::string& list) {
  unsigned mask = 0;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    // Point-to-point is not compressed by the NCCL face; the name is accepted for the library's sake.
    if (item.empty() || strcasecmp(item.c_str(), "none") == 0 || strcasecmp(item.c_str(), "sendrecv") == 0) continue;
    if (strcasecmp(item.c_str(), "all") == 0) {
      mask = (1u << static_cast<unsigned>(Coll::kCount)) - 1;
      continue;
    }
    unsigned bit = 0;
    while (bit < static_cast<unsigned>(Coll::kCount) && strcasecmp(item.c_str(), kCollNames[bit]) != 0) ++bit;
    CCL_CHECK(bit < static_cast<unsigned>(Coll::kCount), cclInvalidArgument,
              "CCL_COMPRESS names an unknown collective '" + item + "'");
    mask |= 1u << bit;
  }
  return mask;
}

Feedback parseFeedback(const std::string& s) {
  if (strcasecmp(s.c_str(), "none") == 0) return Feedback::kNone;
  if (strcasecmp(s.c_str(), "ef") == 0 || strcasecmp(s.c_str(), "residual") == 0) return Feedback::kErrorFeedback;
  if (strcasecmp(s.c_str(), "loco") == 0) return Feedback::kLoco;
  throw Error(cclInvalidArgument, "CCL_FEEDBACK='" + s + "' is not none, ef or loco");
}

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
  Policy p;
  const std::string codec = config::getString("CCL_CODEC");
  CCL_CHECK(cclCodecFromName(codec.c_str(), &p.codec) == cclSuccess, cclInvalidArgument,
            "CCL_CODEC='" + codec + "' is not a codec name");
  const int64_t minBytes = config::getInt("CCL_CODEC_MIN_BYTES");
  CCL_CHECK(minBytes >= 0, cclInvalidArgument, "CCL_CODEC_MIN_BYTES must be >= 0");
  p.minBytes = static_cast<size_t>(minBytes);
  p.enabled = parseCollectives(config::getString("CCL_COMPRESS"));
  p.feedback = parseFeedback(config::getString("CCL_FEEDBACK"));
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

const char* collName(Coll c) { return kCollNames[static_cast<unsigned>(c)]; }

std::string describePolicy(const Policy& p) {
  const char* device = gRunner.load() ? "device buffers: the same policy, through the compressed runner"
                                      : "device buffers: uncompressed, through NVIDIA's NCCL";
  if (p.codec == cclCodecNone)
    return "compression off (CCL_CODEC=none): every collective runs uncompressed, as NCCL defines it";
  std::string colls;
  for (unsigned c = 0; c < static_cast<unsigned>(Coll::kCount); ++c)
    if (p.enables(static_cast<Coll>(c))) colls += std::string(colls.empty() ? "" : ",") + kCollNames[c];
  const char* fb = p.feedback == Feedback::kNone ? "none" : p.feedback == Feedback::kErrorFeedback ? "ef" : "loco";
  const bool shmToo = config::getString("CCL_CODEC_SHM") == "on";
  return std::string("host buffers: codec ") + cclCodecName(p.codec) + " on float " +
         (colls.empty() ? "(none)" : colls) + " of >= " + std::to_string(p.minBytes) + " bytes, feedback " + fb +
         (shmToo ? ", also between ranks that share memory (CCL_CODEC_SHM=on)"
                 : ", except on communicators whose ranks all share memory (CCL_CODEC_SHM=auto)") +
         " (ccl's communicator policy); " + device;
}

}  // namespace ccl::nccl
