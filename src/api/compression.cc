// SPDX-License-Identifier: BSD-3-Clause
#include "api/compression.h"

#include <strings.h>

#include <atomic>

#include <cmath>
#include <sstream>
#include <string>

#include "api/comm.h"
#include "collectives/plan/collective_info.h"
#include "common/config.h"
#include "common/log.h"

uint64_t cclFeedback::nextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace ccl::api {

cclCompression_t compressionNamed(const std::string& name, const char* what) {
  cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
  CCL_CHECK(cclCodecFromName(name.c_str(), &c.codec) == cclSuccess, cclInvalidArgument,
            std::string(what) + "='" + name + "' is not a codec name");
  c.blockSize = static_cast<int>(config::codecBlock());
  if (codec::codecInfo(c.codec).fp16Scales) c.scaleBits = static_cast<int>(config::codecScaleBits());
  if (codec::isSparsifier(c.codec)) c.bits = static_cast<int>(config::codecValueBits());
  c.keepRatio = config::codecKeep();
  c.threshold = static_cast<float>(config::codecThreshold());
  c.stochasticRounding = config::codecStochastic() ? 1 : 0;
  c.seed = static_cast<unsigned long long>(config::codecSeed());
  if (codec::isLowRank(c.codec)) c.rank = static_cast<int>(config::codecRank());
  return c;
}

uint32_t parseCompressList(const std::string& list) {
  uint32_t mask = 0;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty() || strcasecmp(item.c_str(), "none") == 0) continue;
    if (strcasecmp(item.c_str(), "all") == 0 || strcasecmp(item.c_str(), "sendrecv") == 0) {
      const bool all = strcasecmp(item.c_str(), "all") == 0;
      for (int c = 0; c < coll::kNumColls; ++c) {
        const coll::CollInfo info = coll::collInfo(static_cast<coll::Coll>(c));
        if (info.compressible && (all || info.pointToPoint)) mask |= 1u << info.op;
      }
      continue;
    }
    coll::Coll c;
    if (!coll::collFromName(item, &c)) {
      std::string names = "all, sendrecv, none";
      for (int k = 0; k < coll::kNumColls; ++k)
        if (coll::collInfo(static_cast<coll::Coll>(k)).compressible)
          names += std::string(", ") + coll::collInfo(static_cast<coll::Coll>(k)).name;
      throw Error(cclInvalidArgument, "CCL_COMPRESS: unknown collective '" + item + "' (" + names + ")");
    }
    CCL_CHECK(coll::collInfo(c).compressible, cclInvalidArgument,
              "CCL_COMPRESS: " + item + " is never carried compressed");
    mask |= 1u << coll::collInfo(c).op;
  }
  return mask;
}

cclFeedbackKind_t parseFeedbackKind(const std::string& s) {
  if (s.empty() || strcasecmp(s.c_str(), "none") == 0) return cclFeedbackNone;
  if (strcasecmp(s.c_str(), "ef") == 0 || strcasecmp(s.c_str(), "residual") == 0) return cclFeedbackResidual;
  if (strcasecmp(s.c_str(), "loco") == 0) return cclFeedbackLoco;
  throw Error(cclInvalidArgument, "CCL_FEEDBACK='" + s + "' is not none, ef or loco");
}

Policy policyFromEnv(const cclCompression_t* codec) {
  Policy p;
  if (codec) {
    p.codec = codec::resolveParams(codec);
  } else if (const std::string value = config::codec(); value == "auto" || value.rfind("auto:", 0) == 0) {
    p.autoChoice = true;
    for (size_t at = 5; at < value.size();) {
      const size_t end = std::min(value.find(',', at), value.size());
      const std::string name = value.substr(at, end - at);
      cclCompression_t c = compressionNamed(name, "CCL_CODEC");
      p.allowed.push_back(codec::resolveParams(&c));
      CCL_CHECK(p.allowed.back().codec != cclCodecNone && !codec::isLowRank(p.allowed.back().codec), cclInvalidArgument,
                "CCL_CODEC=" + value + ": " + name + " is not a codec auto can choose");
      at = end + 1;
    }
  } else {
    cclCompression_t c = compressionNamed(value, "CCL_CODEC");
    p.codec = codec::resolveParams(&c);
  }
  p.minBytes = static_cast<size_t>(std::max<int64_t>(0, config::codecMinBytes()));
  p.enabled = parseCompressList(config::compress());
  p.autoFeedback = parseFeedbackKind(config::feedback());
  p.locoBeta = static_cast<float>(config::locoBeta());
  p.locoReset = static_cast<int>(config::locoReset());
  return p;
}

codec::Params intraCodecFromEnv(const cclCompression_t* codec) {
  if (codec) return codec::resolveParams(codec);
  cclCompression_t c = compressionNamed(config::codecIntra(), "CCL_CODEC_INTRA");
  return codec::resolveParams(&c);
}

AutoFeedback::Slot AutoFeedback::get(const void* buffer, size_t count, cclDataType_t dtype, int op,
                                     const Policy& policy) {
  const Identity id{buffer, count, static_cast<int>(dtype), op};
  Taken taken;
  taken.any = true;
  taken.next = next_;
  taken.length = length_;
  taken.kept = kept_;
  taken.barrenSteps = barrenSteps_;
  if (length_ == 0 && next_ > 0 && (sequence_.front().id == id || next_ == kMaxPositions)) {
    length_ = next_;  // the first call again: the step's length is learned
    next_ = 0;
    kept_ = 0;
  }
  if (next_ == sequence_.size()) {
    sequence_.push_back(
        Entry{id, std::make_unique<cclFeedback>(policy.autoFeedback, policy.locoBeta, policy.locoReset), 0});
    sequence_.back().state->automatic = true;
    taken.appended = true;
  }
  const size_t at = next_++;
  Entry& e = sequence_[at];
  taken.at = at;
  taken.id = e.id;
  taken.generation = e.generation;
  if (e.id == id) {
    ++kept_;
  } else {  // another tensor at this position: it starts from a zero residual
    e.id = id;
    ++e.generation;
  }
  if (length_ > 0 && next_ == length_) {  // the step's last call
    barrenSteps_ = kept_ == 0 ? barrenSteps_ + 1 : 0;
    next_ = 0;
    kept_ = 0;
    if (barrenSteps_ == 2) {  // the step's length changed: learn it again
      length_ = 0;
      barrenSteps_ = 0;
    }
  }
  return Slot{e.state.get(), e.generation, taken};
}

void AutoFeedback::giveBack(const Taken& taken) {
  if (!taken.any || taken.at >= sequence_.size() || (taken.appended && taken.at + 1 != sequence_.size())) return;
  if (taken.appended) {
    // Nothing ran on the state: the call that appended it did not run.
    sequence_.pop_back();
  } else {
    // The same generation again: the position's state keeps its residual (prepare() zeroes it
    // only for a generation it has not seen), as if the call had never come.
    sequence_[taken.at].id = taken.id;
    sequence_[taken.at].generation = taken.generation;
  }
  next_ = taken.next;
  length_ = taken.length;
  kept_ = taken.kept;
  barrenSteps_ = taken.barrenSteps;
}

}  // namespace ccl::api

extern "C" {

CCL_API cclResult_t cclFeedbackCreate(cclFeedback_t* feedback, cclFeedbackKind_t kind, float beta, int resetPeriod) {
  return ccl::api::guard(nullptr, "cclFeedbackCreate", [&] {
    CCL_CHECK(feedback, cclInvalidArgument, "feedback is NULL");
    CCL_CHECK(kind == cclFeedbackResidual || kind == cclFeedbackLoco || kind == cclFeedbackNone, cclInvalidArgument,
              "kind " + std::to_string(static_cast<int>(kind)) + " is not a cclFeedbackKind_t");
    CCL_CHECK(beta >= 0.0f && beta < 1.0f, cclInvalidArgument, "beta must be in [0, 1)");
    CCL_CHECK(resetPeriod >= 0, cclInvalidArgument, "resetPeriod must be >= 0");
    *feedback = new cclFeedback(kind, beta, resetPeriod);
  });
}

CCL_API cclResult_t cclFeedbackErrorNorm(cclFeedback_t feedback, double* norm) {
  return ccl::api::guard(nullptr, "cclFeedbackErrorNorm", [&] {
    CCL_CHECK(feedback && norm, cclInvalidArgument, "feedback or norm is NULL");
    CCL_CHECK(!feedback->onDevice, cclInvalidUsage, "this feedback state keeps its error in device memory");
    *norm = feedback->errorNorm();
  });
}

CCL_API cclResult_t cclCodecErrorBound(const cclCompression_t* compression, double absValue, double absMax,
                                       int quantizations, double* bound) {
  return ccl::api::guard(nullptr, "cclCodecErrorBound", [&] {
    CCL_CHECK(bound, cclInvalidArgument, "bound is NULL");
    CCL_CHECK(absValue >= 0.0 && absMax >= absValue && std::isfinite(absMax), cclInvalidArgument,
              "need 0 <= absValue <= absMax < inf, got absValue " + std::to_string(absValue) + " absMax " +
                  std::to_string(absMax));
    CCL_CHECK(quantizations >= 0, cclInvalidArgument, "quantizations must be >= 0");
    *bound = ccl::codec::errorBound(ccl::codec::resolveParams(compression), absValue, absMax, quantizations);
  });
}

CCL_API cclResult_t cclFeedbackDestroy(cclFeedback_t feedback) {
  delete feedback;
  return cclSuccess;
}

}  // extern "C"
