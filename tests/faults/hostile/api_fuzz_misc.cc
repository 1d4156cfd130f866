// SPDX-License-Identifier: BSD-3-Clause
// Calls that need no peer: names, version, errors, codec queries, feedback and stream
// handles, group misuse; and miscCall, which draws one of them or of api_fuzz_misc_comm.cc's.
#include <cctype>
#include <climits>
#include <cmath>
#include <iterator>
#include <string>

#include "api_fuzz.h"

namespace apifuzz {
namespace {

std::string randomText(Rng& g) {
  static const char* words[] = {
      "int8",   "INT4",   "topk",     "none",  "auto",     "all",     "sendrecv", "allreduce",
      "ring",   "tree",   "fp8_e4m3", "mxfp4", "",         " ",       ",",        "allreduce,,broadcast",
      "reduce", "gather", "twoshot",  "hier",  "powersgd", "invalid", "\xff\xfe"};
  std::string s;
  const int k = static_cast<int>(g.range(0, 3));
  for (int i = 0; i < k; ++i) {
    if (i) s += g.chance(0.7) ? "," : " ";
    if (g.chance(0.8)) {
      s += words[g.below(sizeof(words) / sizeof(words[0]))];
    } else {
      const int len = static_cast<int>(g.range(1, 40));
      for (int j = 0; j < len; ++j) s += static_cast<char>(1 + g.below(255));
    }
  }
  return s;
}

double randomDouble(Rng& g) {
  static const double special[] = {0.0, -0.0, 1.0, -1.0, NAN, INFINITY, -INFINITY, 1e308, 1e-308, 5e-324};
  return g.chance(0.5) ? special[g.below(10)] : (g.unit() - 0.3) * std::pow(10.0, static_cast<double>(g.range(-5, 5)));
}

}  // namespace

int randomInt(Rng& g) {
  static const int special[] = {0, 1, -1, 2, 3, 7, 12, 13, 100, INT_MIN, INT_MAX, -1000};
  return g.chance(0.6) ? special[g.below(12)] : static_cast<int>(g.next());
}

namespace {

void tryVersion(Rng&, World&, int) {
  int v = -7;
  call("cclGetVersion", [&] { return cclGetVersion(&v); });
  if (v != CCL_VERSION_CODE) problem("cclGetVersion gave " + std::to_string(v));
  expectRefused("cclGetVersion(NULL)", call("cclGetVersion", [] { return cclGetVersion(nullptr); }));
}

void tryErrorString(Rng& g, World&, int) {
  judgeName("cclGetErrorString", cclGetErrorString(static_cast<cclResult_t>(randomInt(g))));
  judgeName("cclGetErrorString", cclGetErrorString(static_cast<cclResult_t>(g.below(cclNumResults))));
}

void tryLastError(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  tally.inputs.fetch_add(1);
  tally.completed.fetch_add(1);
  cclComm_t which = g.chance(0.3) ? garbage() : g.chance(0.5) ? nullptr : comm;
  if (!cclGetLastError(which)) problem("cclGetLastError returned NULL");
}

void tryCodecNames(Rng& g, World&, int) {
  const int c = randomInt(g);
  const char* name = cclCodecName(static_cast<cclCodec_t>(c));
  judgeName("cclCodecName", name);
  if (c >= 0 && c < cclNumCodecs) {
    cclCodec_t back = cclNumCodecs;
    std::string upper = name;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    call("cclCodecFromName", [&] { return cclCodecFromName(upper.c_str(), &back); });
    if (back != c) problem(std::string("cclCodecFromName(") + upper + ") did not give codec " + std::to_string(c));
  }
}

void tryCodecFromName(Rng& g, World&, int) {
  const std::string text = randomText(g);
  cclCodec_t c = static_cast<cclCodec_t>(-5);
  const bool nullName = g.chance(0.1), nullOut = g.chance(0.1);
  const cclResult_t rc = call(
      "cclCodecFromName", [&] { return cclCodecFromName(nullName ? nullptr : text.c_str(), nullOut ? nullptr : &c); });
  if (rc == cclSuccess && (nullName || nullOut || c < 0 || c >= cclNumCodecs))
    problem("cclCodecFromName('" + text + "') succeeded with codec " + std::to_string(c));
  if (rc != cclSuccess && c != static_cast<cclCodec_t>(-5)) problem("cclCodecFromName failed but wrote *codec");
}

void tryCounts(Rng&, World&, int) {
  tally.inputs.fetch_add(3);
  tally.completed.fetch_add(3);
  if (cclCodecCount() != cclNumCodecs) problem("cclCodecCount is " + std::to_string(cclCodecCount()));
  if (cclOpKindCount() != cclNumOpKinds) problem("cclOpKindCount is " + std::to_string(cclOpKindCount()));
  if (cclAlgorithmCount() < 1) problem("cclAlgorithmCount is " + std::to_string(cclAlgorithmCount()));
}

void tryErrorBound(Rng& g, World&, int) {
  std::string why;
  cclCompression_t c = g.chance(0.3) ? invalidCompression(g, &why) : randomCompression(g);
  const double a = randomDouble(g), m = g.chance(0.5) ? std::fabs(a) * 2 : randomDouble(g);
  const int q = g.chance(0.8) ? static_cast<int>(g.range(0, 8)) : randomInt(g);
  double bound = -12345;
  const bool nullCodec = g.chance(0.1), nullOut = g.chance(0.05);
  const cclResult_t rc = call("cclCodecErrorBound", [&] {
    return cclCodecErrorBound(nullCodec ? nullptr : &c, a, m, q, nullOut ? nullptr : &bound);
  });
  if (rc == cclSuccess && (nullOut || std::isnan(bound) || bound < 0))
    problem("cclCodecErrorBound gave " + std::to_string(bound));
  if (rc != cclSuccess && bound != -12345) problem("cclCodecErrorBound failed but wrote *bound");
  if (rc == cclSuccess && !why.empty() && !nullCodec)
    problem("cclCodecErrorBound accepted invalid parameters (" + why + ")");
}

void tryOpKindNames(Rng& g, World&, int) {
  const int k = randomInt(g);
  const char* name = cclOpKindName(static_cast<cclOpKind_t>(k));
  judgeName("cclOpKindName", name);
  cclOpKind_t back = static_cast<cclOpKind_t>(-3);
  const std::string text = g.chance(0.5) ? std::string(name) : randomText(g);
  const bool nullOut = g.chance(0.1);
  const cclResult_t rc =
      call("cclOpKindFromName", [&] { return cclOpKindFromName(text.c_str(), nullOut ? nullptr : &back); });
  if (rc == cclSuccess && (nullOut || back < 0 || back >= cclNumOpKinds))
    problem("cclOpKindFromName('" + text + "') succeeded with " + std::to_string(back));
  if (k >= 0 && k < cclNumOpKinds && text == name && !nullOut && back != k)
    problem(std::string("cclOpKindFromName(") + name + ") did not round-trip");
}

void tryCompressList(Rng& g, World&, int) {
  const std::string text = randomText(g);
  unsigned mask = 0xdeadbeef;
  const bool nullList = g.chance(0.1), nullOut = g.chance(0.1);
  const cclResult_t rc = call("cclCompressListParse", [&] {
    return cclCompressListParse(nullList ? nullptr : text.c_str(), nullOut ? nullptr : &mask);
  });
  if (rc == cclSuccess && !nullOut && (mask >> cclNumOpKinds) != 0)
    problem("cclCompressListParse('" + text + "') set bits beyond the op kinds");
  if (rc != cclSuccess && mask != 0xdeadbeef) problem("cclCompressListParse failed but wrote *mask");
}

void tryAlgorithmNames(Rng& g, World&, int) {
  const int a = randomInt(g);
  judgeName("cclAlgorithmName", cclAlgorithmName(a));
  int back = -77;
  const std::string text = g.chance(0.5) ? std::string(cclAlgorithmName(a)) : randomText(g);
  const cclResult_t rc = call("cclAlgorithmFromName", [&] { return cclAlgorithmFromName(text.c_str(), &back); });
  if (rc == cclSuccess && (back < 0 || back >= cclAlgorithmCount()))
    problem("cclAlgorithmFromName('" + text + "') gave " + std::to_string(back));
  const char* name = g.chance(0.5) ? nullptr : "ring";
  expectRefused("cclAlgorithmFromName(NULL output)",
                call("cclAlgorithmFromName", [&] { return cclAlgorithmFromName(name, nullptr); }));
}

void tryFeedbackHandles(Rng& g, World&, int) {
  cclFeedback_t fb = nullptr;
  const int kind = g.chance(0.7) ? static_cast<int>(g.below(3)) : randomInt(g);
  const float beta = g.chance(0.7) ? static_cast<float>(g.unit()) : static_cast<float>(randomDouble(g));
  const int reset = g.chance(0.7) ? static_cast<int>(g.below(5)) : randomInt(g);
  const bool nullOut = g.chance(0.1);
  const cclResult_t rc = call("cclFeedbackCreate", [&] {
    return cclFeedbackCreate(nullOut ? nullptr : &fb, static_cast<cclFeedbackKind_t>(kind), beta, reset);
  });
  const bool valid = !nullOut && kind >= 0 && kind <= 2 && beta >= 0 && beta < 1 && reset >= 0;
  if (rc == cclSuccess && !valid) problem("cclFeedbackCreate accepted invalid arguments");
  if (rc != cclSuccess && valid) problem("cclFeedbackCreate refused valid arguments: " + lastError());
  if (rc != cclSuccess && fb) problem("cclFeedbackCreate failed but wrote *feedback");
  call("cclFeedbackDestroy", [&] { return cclFeedbackDestroy(rc == cclSuccess ? fb : nullptr); });
}

void tryHostStreams(Rng&, World&, int) {
  expectRefused("cclHostStreamCreate(NULL)", call("cclHostStreamCreate", [] { return cclHostStreamCreate(nullptr); }));
  cclStream_t s = nullptr;
  if (call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&s); }) != cclSuccess) return;
  call(
      "cclHostStreamQuery", [&] { return cclHostStreamQuery(s); }, true);
  call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); });
  call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); });
  call("cclHostStreamDestroy", [] { return cclHostStreamDestroy(nullptr); });
}

void tryBadStreams(Rng& g, World&, int) {
  if (g.chance(0.3)) {
    // A destroyed stream's handle is looked up, never followed: refused, unless another
    // thread's new stream took its address meanwhile (then it is that stream: either way
    // a valid result, and nothing here destroys it).
    cclStream_t old = nullptr;
    if (call("cclHostStreamCreate", [&] { return cclHostStreamCreate(&old); }) != cclSuccess) return;
    call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(old); });
    call(
        "cclHostStreamQuery", [&] { return cclHostStreamQuery(old); }, true);
    call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(old); });
    return;
  }
  cclStream_t s = g.chance(0.5) ? fakeStream() : nullptr;
  expectRefused("cclHostStreamSynchronize(bad)",
                call("cclHostStreamSynchronize", [&] { return cclHostStreamSynchronize(s); }));
  expectRefused("cclHostStreamQuery(bad)", call("cclHostStreamQuery", [&] { return cclHostStreamQuery(s); }));
  if (s)
    expectRefused("cclHostStreamDestroy(bad)", call("cclHostStreamDestroy", [&] { return cclHostStreamDestroy(s); }));
}

void tryGroupMisuse(Rng& g, World&, int) {
  // Group misuse: an end without a start; balanced empty groups, nested.
  expectRefused("cclGroupEnd without cclGroupStart", call("cclGroupEnd", [] { return cclGroupEnd(); }));
  const int depth = static_cast<int>(g.range(1, 4));
  for (int d = 0; d < depth; ++d) call("cclGroupStart", [] { return cclGroupStart(); });
  for (int d = 0; d < depth; ++d)
    if (call("cclGroupEnd", [] { return cclGroupEnd(); }) != cclSuccess) problem("an empty group failed");
}

}  // namespace

// The calls other than the collectives, one function each. A call refused on this rank alone
// (tryRefusedCall) is drawn four times as often as each of the others.
using MiscCall = void (*)(Rng& g, World& w, int r);
constexpr MiscCall kMiscCalls[] = {
    tryVersion,        tryErrorString, tryLastError,    tryCodecNames,     tryCodecFromName,   tryCounts,
    tryErrorBound,     tryOpKindNames, tryCompressList, tryAlgorithmNames, tryFeedbackHandles, tryHostStreams,
    tryBadStreams,     tryGroupMisuse, tryQueries,      tryTopology,       tryStats,           tryBadComms,
    tryBadCompression, tryBadInit,     tryBadInitAll,   tryBadConfig};

void miscCall(Rng& g, World& w, int r) {
  const size_t k = g.below(std::size(kMiscCalls) + 4);
  (k < std::size(kMiscCalls) ? kMiscCalls[k] : tryRefusedCall)(g, w, r);
}

}  // namespace apifuzz
