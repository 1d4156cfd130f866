// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/policy.h"

#include <mutex>

#include "api/compression.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

namespace ccl::nccl {

void announcePolicy() {
  static std::once_flag once;
  std::call_once(once, [] { CCL_INFO("NCCL face: %s", describePolicy().c_str()); });
}

void readCollConfig(CollCall& call) {
  const ncclCollConfig_t* c = call.config;
  if (!c) return;
  CCL_CHECK(c->size >= CCL_NCCL_COLLCONFIG_MIN_SIZE, cclInvalidArgument,
            "config->size " + std::to_string(c->size) + " is smaller than NCCL 2.31's ncclCollConfig_t");
  CCL_CHECK(c->magic == NCCL_API_MAGIC, cclInvalidArgument,
            "config->magic is not NCCL's: initialise the config with NCCL_COLLCONFIG_INITIALIZER");
  CCL_CHECK(c->forceAlgSelection == 0 || c->forceAlgSelection == 1, cclInvalidArgument,
            "config->forceAlgSelection must be 0 or 1, not " + std::to_string(c->forceAlgSelection));
  CCL_CHECK(c->CTAPolicy == NCCL_CONFIG_UNDEF_INT || (c->CTAPolicy >= 0 && c->CTAPolicy <= 3), cclInvalidArgument,
            "config->CTAPolicy " + std::to_string(c->CTAPolicy) + " is not an NCCL_CTA_POLICY_* mask");
  int seen = 0;
  for (const ncclConfigExt_t* e = c->ext; e; e = e->next) {
    CCL_CHECK(++seen <= 4096, cclInvalidArgument, "config->ext has more than 4096 options (a cycle?)");
    if (e->key.vendorId != CCL_NCCL_VENDOR_ID) continue;  // another vendor's
    CCL_CHECK(e->key.optionId == CCL_NCCL_OPTION_CODEC, cclInvalidArgument,
              "config->ext: ccl has no option " + std::to_string(e->key.optionId) + " (CCL_NCCL_OPTION_CODEC is " +
                  std::to_string(CCL_NCCL_OPTION_CODEC) + ")");
    CCL_CHECK(!call.hasCodec, cclInvalidArgument, "config->ext names ccl's codec option twice");
    CCL_CHECK(e->val.s, cclInvalidArgument, "config->ext: ccl's codec option has no name (val.s is NULL)");
    call.codec = api::compressionNamed(e->val.s, "ccl's codec option");
    call.hasCodec = true;
  }
}

std::string describePolicy() {
  CCL_CHECK(config::codecMinBytes() >= 0, cclInvalidArgument, "CCL_CODEC_MIN_BYTES must be >= 0");
  // The communicators' own parser: one reading of each variable, CCL_CODEC=auto included.
  const api::Policy p = api::policyFromEnv(nullptr);
  auto names = [&](bool listed) {
    std::string out;
    for (int c = 0; c < coll::kNumColls; ++c) {
      const coll::CollInfo info = coll::collInfo(static_cast<Coll>(c));
      if (info.compressible && ((p.enabled >> info.op) & 1u) == listed)
        out += std::string(out.empty() ? "" : ",") + info.name;
    }
    return out.empty() ? std::string("(none)") : out;
  };
  const bool oneNodeToo = config::codecShm() == "on";
  const std::string where =
      oneNodeToo ? "also between ranks of one node (CCL_CODEC_SHM=on)"
                 : "not between ranks that all share one node (CCL_CODEC_SHM=auto: shared memory, NVLink)";
  if (p.autoChoice) {
    std::string allowed;
    for (const codec::Params& c : p.allowed) allowed += std::string(allowed.empty() ? "" : ",") + cclCodecName(c.codec);
    return "CCL_CODEC=auto: host buffers per call shape uncompressed or " +
           (allowed.empty() ? std::string("(no lossy codec allowed)") : allowed) + " on " + names(true) +
           ", whichever ccl's cost model prices fastest; device buffers uncompressed (NVIDIA's NCCL)";
  }
  if (p.codec.codec == cclCodecNone)
    return "compression off (CCL_CODEC=none): every collective runs uncompressed, as NCCL defines it";
  const cclFeedbackKind_t fb = p.autoFeedback;
  return std::string("lossy: codec ") + cclCodecName(p.codec.codec) + " on float (fp32, bf16, fp16) sum/avg " +
         names(true) + " of >= " + std::to_string(p.minBytes) + " bytes, " + where + ", feedback " +
         (fb == cclFeedbackNone       ? "none"
          : fb == cclFeedbackResidual ? "ef"
                                      : "loco") +
         "; exact: " + names(false) +
         " (not in CCL_COMPRESS), and every other collective, type and reduction. Device buffers: compressed "
         "calls run on ccl over NVIDIA's NCCL, the rest on NVIDIA's NCCL as they are";
}

}  // namespace ccl::nccl
