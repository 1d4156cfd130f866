// SPDX-License-Identifier: BSD-3-Clause
#include "site_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "schedule.h"

namespace gpt {

bool applies(const SiteCodec& c, const CallPlace& at) {
  if (!c.active() || at.step < c.warmupSteps) return false;
  if (at.layer >= 0 && (at.layer < c.firstLayer || at.layer >= c.endLayer)) return false;
  if (at.stage >= 64 || (at.stage >= 0 && ((c.stages >> at.stage) & 1u) == 0)) return false;
  return at.phase < 0 || ((c.phases >> at.phase) & 1u) != 0;
}

namespace {

constexpr Phase kPhases[] = {Phase::kWarmup, Phase::kSteady, Phase::kCooldown};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (;;) {
    const size_t at = s.find(sep, from);
    out.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}

[[noreturn]] void fail(const std::string& spec, const std::string& why) {
  throw std::invalid_argument("--compress " + spec + ": " + why);
}

double number(const std::string& spec, const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') fail(spec, key + "=" + v + " is not a number");
  return d;
}

int integer(const std::string& spec, const std::string& key, const std::string& v) {
  const double d = number(spec, key, v);
  if (d != static_cast<double>(static_cast<int>(d)) || d < 0) fail(spec, key + "=" + v + " is not a count");
  return static_cast<int>(d);
}

// "A", "A-B" (inclusive) or "A-": [first, end).
std::pair<int, int> range(const std::string& spec, const std::string& key, const std::string& v) {
  const size_t dash = v.find('-');
  if (dash == std::string::npos) {
    const int a = integer(spec, key, v);
    return {a, a + 1};
  }
  const int a = integer(spec, key, v.substr(0, dash));
  const std::string b = v.substr(dash + 1);
  const int end = b.empty() ? 1 << 30 : integer(spec, key, b) + 1;
  if (end <= a) fail(spec, key + "=" + v + " is an empty range");
  return {a, end};
}

// Whether z's codec is a quantiser: the only codecs whose error on a zero element of a
// nonzero block can be nonzero and is bounded (a sparsifier's bound is |x|, powersgd's none).
bool quantizer(const cclCompression_t& z) {
  double b = 0;
  return z.codec != cclCodecNone && cclCodecErrorBound(&z, 0, 1, 1, &b) == cclSuccess && b > 0 && std::isfinite(b);
}

void requireScope(const std::string& spec, const SiteInfo& site, Scope scope, const std::string& key) {
  if (site.scope != scope)
    fail(spec,
         key + "= does not apply to " + site.name +
             (scope == Scope::kLayers ? " (only to tp.fwd and tp.bwd)" : " (only to pp.fwd, pp.bwd and dp.grad)"));
}

}  // namespace

std::pair<Site, SiteCodec> parseSiteCodec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) fail(spec, "expected SITE=CODEC[:key=value]...");
  Site site;
  if (!siteFromName(spec.substr(0, eq), &site)) fail(spec, "no site " + spec.substr(0, eq));
  const SiteInfo& info = siteInfo(site);
  if (!info.compressible) fail(spec, std::string(info.name) + " is not compressed (it carries " + info.what + ")");
  const std::vector<std::string> parts = split(spec.substr(eq + 1), ':');
  SiteCodec c;
  if (cclCodecFromName(parts[0].c_str(), &c.compression.codec) != cclSuccess)
    fail(spec, "no codec " + parts[0] + " (ccl-info lists them)");
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t at = parts[i].find('=');
    const std::string key = parts[i].substr(0, at), value = at == std::string::npos ? "" : parts[i].substr(at + 1);
    if (key == "stochastic") {  // the bare word, or =0 / =1 as --help spells the other keys
      if (at != std::string::npos && value != "0" && value != "1") fail(spec, "stochastic=" + value + " is not 0 or 1");
      c.compression.stochasticRounding = at == std::string::npos || value == "1" ? 1 : 0;
    } else if (key == "block") {
      c.compression.blockSize = integer(spec, key, value);
    } else if (key == "bits") {
      c.compression.bits = integer(spec, key, value);
    } else if (key == "scale-bits") {
      c.compression.scaleBits = integer(spec, key, value);
    } else if (key == "keep") {
      c.compression.keepRatio = number(spec, key, value);
    } else if (key == "threshold") {
      c.compression.threshold = static_cast<float>(number(spec, key, value));
    } else if (key == "rank") {
      c.compression.rank = integer(spec, key, value);
    } else if (key == "seed") {
      c.compression.seed = static_cast<unsigned long long>(integer(spec, key, value));
    } else if (key == "feedback") {
      if (value == "none")
        c.feedback = cclFeedbackNone;
      else if (value == "ef")
        c.feedback = cclFeedbackResidual;
      else if (value == "loco")
        c.feedback = cclFeedbackLoco;
      else
        fail(spec, "feedback=" + value + " is not none, ef or loco");
    } else if (key == "beta") {
      c.locoBeta = static_cast<float>(number(spec, key, value));
      if (!(c.locoBeta >= 0 && c.locoBeta < 1)) fail(spec, "beta must be in [0, 1)");
    } else if (key == "reset") {
      c.locoReset = integer(spec, key, value);
    } else if (key == "layers") {
      requireScope(spec, info, Scope::kLayers, key);
      std::tie(c.firstLayer, c.endLayer) = range(spec, key, value);
    } else if (key == "stages") {
      requireScope(spec, info, Scope::kStages, key);
      c.stages = 0;
      for (const std::string& part : split(value, '+')) {
        const auto [first, end] = range(spec, key, part);
        if (first >= 64) fail(spec, "stages go up to 63");
        for (int st = first; st < std::min(end, 64); ++st) c.stages |= 1ull << st;
      }
    } else if (key == "phases") {
      if (info.group != Group::kPp) fail(spec, "phases= applies to pp.fwd and pp.bwd only");
      c.phases = 0;
      for (const std::string& name : split(value, '+')) {
        bool known = false;
        for (Phase p : kPhases)
          if (name == phaseName(p)) c.phases |= 1u << static_cast<int>(p), known = true;
        if (!known) fail(spec, "phases: " + name + " is not warmup, steady or cooldown");
      }
    } else if (key == "warmup") {
      c.warmupSteps = integer(spec, key, value);
    } else if (key == "scale") {
      if (value != "channel" && value != "block") fail(spec, "scale=" + value + " is not channel or block");
      c.channelScales = value == "channel";
    } else if (key == "warmstart") {
      if (value != "on" && value != "off") fail(spec, "warmstart=" + value + " is not on or off");
      c.warmStartOnly = value == "on";
      c.compression.warmStart = value == "on" ? 1 : -1;
    } else {
      fail(spec, "unknown key " + key);
    }
  }
  if (c.feedback != cclFeedbackNone && !c.active()) fail(spec, "feedback without a codec");
  if (c.channelScales && !quantizer(c.compression)) fail(spec, "scale=channel takes a quantiser");
  if (c.compression.warmStart != 0 && c.compression.codec != cclCodecPowerSgd) fail(spec, "warmstart= takes powersgd");
  if (c.compression.warmStart == 1 && c.feedback != cclFeedbackNone) c.warmStartOnly = false;  // ef keeps Q anyway
  if (c.feedback == cclFeedbackLoco && c.compression.codec == cclCodecPowerSgd)
    fail(spec, "powersgd keeps its warm start in the feedback state: feedback=ef, not loco");
  // The library's own check of the parameters, as a collective would make it.
  double bound = 0;
  if (c.active() && cclCodecErrorBound(&c.compression, 0, 0, 1, &bound) != cclSuccess)
    fail(spec, cclGetLastError(nullptr));
  return {site, c};
}

std::string describe(Site s, const SiteCodec& c) {
  std::string out = std::string(siteName(s)) + "=" + cclCodecName(c.compression.codec);
  auto add = [&](const std::string& kv) { out += ":" + kv; };
  const cclCompression_t& z = c.compression;
  if (z.blockSize) add("block=" + std::to_string(z.blockSize));
  if (z.bits) add("bits=" + std::to_string(z.bits));
  if (z.scaleBits) add("scale-bits=" + std::to_string(z.scaleBits));
  if (z.keepRatio > 0) add("keep=" + std::to_string(z.keepRatio));
  if (z.threshold > 0) add("threshold=" + std::to_string(z.threshold));
  if (z.stochasticRounding) add("stochastic");
  if (z.seed) add("seed=" + std::to_string(z.seed));
  if (z.rank) add("rank=" + std::to_string(z.rank));
  if (c.feedback == cclFeedbackResidual) add("feedback=ef");
  if (c.feedback == cclFeedbackLoco)
    add("feedback=loco:beta=" + std::to_string(c.locoBeta) + ":reset=" + std::to_string(c.locoReset));
  auto span = [](int first, int end) {
    if (end == first + 1) return std::to_string(first);
    return std::to_string(first) + "-" + (end >= 1 << 30 ? "" : std::to_string(end - 1));
  };
  if (c.channelScales) add("scale=channel");
  if (z.warmStart) add(z.warmStart > 0 ? "warmstart=on" : "warmstart=off");
  if (c.firstLayer != 0 || c.endLayer != 1 << 30) add("layers=" + span(c.firstLayer, c.endLayer));
  if (c.stages != ~0ull) {
    // Runs of set bits, as ranges joined by '+'; a run reaching bit 63 is open-ended.
    std::string set;
    for (int st = 0; st < 64;) {
      if (((c.stages >> st) & 1u) == 0) {
        ++st;
        continue;
      }
      int end = st;
      while (end < 64 && ((c.stages >> end) & 1u)) ++end;
      if (!set.empty()) set += '+';
      set += end == 64 ? std::to_string(st) + "-" : span(st, end);
      st = end;
    }
    add("stages=" + set);
  }
  if (c.phases != ~0u) {
    std::string names;
    for (Phase p : kPhases)
      if ((c.phases >> static_cast<int>(p)) & 1u) {
        if (!names.empty()) names += '+';
        names += phaseName(p);
      }
    add("phases=" + names);
  }
  if (c.warmupSteps) add("warmup=" + std::to_string(c.warmupSteps));
  return out;
}

}  // namespace gpt
