// SPDX-License-Identifier: BSD-3-Clause
// The calls of miscCall about a communicator, on one rank alone: queries and statistics of
// its own, bad handles, inits refused before any rendezvous, and a call refused outright.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "api_fuzz.h"

namespace apifuzz {

void tryQueries(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  // Queries of the real communicator, with NULL outputs now and then.
  int v = -9;
  const bool nullOut = g.chance(0.3);
  switch (g.below(4)) {
    case 0: {
      const cclResult_t rc = call("cclCommCount", [&] { return cclCommCount(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommCount(NULL)", rc);
      if (!nullOut && v != n) problem("cclCommCount gave " + std::to_string(v));
      break;
    }
    case 1: {
      const cclResult_t rc = call("cclCommUserRank", [&] { return cclCommUserRank(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommUserRank(NULL)", rc);
      if (!nullOut && v != r) problem("cclCommUserRank gave " + std::to_string(v));
      break;
    }
    case 2: {
      const cclResult_t rc = call("cclCommCuDevice", [&] { return cclCommCuDevice(comm, nullOut ? nullptr : &v); });
      if (nullOut) expectRefused("cclCommCuDevice(NULL)", rc);
      if (!nullOut && v < -1) problem("cclCommCuDevice gave " + std::to_string(v));
      break;
    }
    default: {
      cclResult_t e = static_cast<cclResult_t>(-1);
      const cclResult_t rc =
          call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(comm, nullOut ? nullptr : &e); });
      if (nullOut) expectRefused("cclCommGetAsyncError(NULL)", rc);
      if (!nullOut && e != cclSuccess) problem("a healthy communicator has async error " + std::to_string(e));
      break;
    }
  }
}

void tryTopology(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  int node = -5, nnodes = -5, local = -5, locals = -5;
  const unsigned which = static_cast<unsigned>(g.below(16));
  call("cclCommTopology", [&] {
    return cclCommTopology(comm, which & 1 ? &node : nullptr, which & 2 ? &nnodes : nullptr,
                           which & 4 ? &local : nullptr, which & 8 ? &locals : nullptr);
  });
  if ((which & 1 && (node < 0 || node >= n)) || (which & 2 && (nnodes < 1 || nnodes > n)) ||
      (which & 4 && (local < 0 || local >= n)) || (which & 8 && (locals < 1 || locals > n)) ||
      ((which & 3) == 3 && node >= nnodes))
    problem("cclCommTopology gave node " + std::to_string(node) + " of " + std::to_string(nnodes) + ", local " +
            std::to_string(local) + " of " + std::to_string(locals));
}

void tryStats(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  // Statistics into a struct whose size says how much may be written.
  Guarded buf(sizeof(cclStats_t), 0);
  cclStats_t init = CCL_STATS_INITIALIZER;
  const uint64_t k = g.below(5);
  init.size = k == 0   ? g.below(offsetof(cclStats_t, op))
              : k == 1 ? sizeof(cclStats_t)
                       : g.below(sizeof(cclStats_t) + 1);
  if (g.chance(0.1)) init.magic ^= 1u << g.below(32);
  std::memcpy(buf.data(), &init, sizeof(init));
  std::vector<uint8_t> before(buf.data(), buf.data() + buf.bytes());
  const bool nullOut = g.chance(0.05);
  const cclResult_t rc = call("cclCommGetStats", [&] {
    return cclCommGetStats(comm, nullOut ? nullptr : reinterpret_cast<cclStats_t*>(buf.data()));
  });
  const bool valid = !nullOut && init.magic == CCL_STATS_MAGIC && init.size >= offsetof(cclStats_t, op);
  if (rc == cclSuccess && !valid) problem("cclCommGetStats accepted an invalid stats struct");
  if (rc != cclSuccess && valid) problem("cclCommGetStats refused a valid stats struct: " + lastError());
  const size_t written = rc == cclSuccess ? std::min(init.size, sizeof(cclStats_t)) : 0;
  if (std::memcmp(buf.data() + written, before.data() + written, buf.bytes() - written) != 0)
    problem("cclCommGetStats wrote beyond stats->size (" + std::to_string(init.size) + ")");
  if (buf.hit()) problem("cclCommGetStats wrote outside the struct");
}

void tryBadComms(Rng& g, World&, int) {
  // Every function that takes a communicator, given NULL or one that is not.
  cclComm_t bad = g.chance(0.5) ? garbage() : nullptr;
  int v = 1234;
  cclResult_t e = static_cast<cclResult_t>(1234);
  cclComm_t child = reinterpret_cast<cclComm_t>(0x1);
  switch (g.below(10)) {
    case 0:
      expectRefused("cclCommCount(bad)", call("cclCommCount", [&] { return cclCommCount(bad, &v); }));
      break;
    case 1:
      expectRefused("cclCommUserRank(bad)", call("cclCommUserRank", [&] { return cclCommUserRank(bad, &v); }));
      break;
    case 2:
      expectRefused("cclCommCuDevice(bad)", call("cclCommCuDevice", [&] { return cclCommCuDevice(bad, &v); }));
      break;
    case 3:
      expectRefused("cclCommGetAsyncError(bad)",
                    call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(bad, &e); }));
      break;
    case 4:
      expectRefused("cclCommTopology(bad)",
                    call("cclCommTopology", [&] { return cclCommTopology(bad, &v, &v, &v, &v); }));
      break;
    case 5:
      expectRefused("cclCommFinalize(bad)", call("cclCommFinalize", [&] { return cclCommFinalize(bad); }));
      break;
    case 6:
      if (bad) {
        expectRefused("cclCommDestroy(garbage)", call("cclCommDestroy", [&] { return cclCommDestroy(bad); }));
        expectRefused("cclCommAbort(garbage)", call("cclCommAbort", [&] { return cclCommAbort(bad); }));
      } else if (call("cclCommDestroy", [] { return cclCommDestroy(nullptr); }) != cclSuccess ||
                 call("cclCommAbort", [] { return cclCommAbort(nullptr); }) != cclSuccess) {
        problem("cclCommDestroy/cclCommAbort(NULL) failed");
      }
      break;
    case 7:
      expectRefused("cclCommSplit(bad)",
                    call("cclCommSplit", [&] { return cclCommSplit(bad, 0, 0, &child, nullptr); }));
      // A failed creation leaves NULL (ccl.h; NCCL's rule), never the variable's old value.
      if (child != nullptr) problem("cclCommSplit failed but left *newcomm non-NULL");
      break;
    case 8: {
      cclCompression_t c = CCL_COMPRESSION_INITIALIZER;
      expectRefused("cclCommSetCompression(bad)",
                    call("cclCommSetCompression", [&] { return cclCommSetCompression(bad, &c); }));
      break;
    }
    default: {
      cclStats_t s = CCL_STATS_INITIALIZER;
      expectRefused("cclCommGetStats(bad)", call("cclCommGetStats", [&] { return cclCommGetStats(bad, &s); }));
      break;
    }
  }
  if (v != 1234 || e != static_cast<cclResult_t>(1234)) problem("a call on a bad communicator wrote its output");
}

void tryBadCompression(Rng& g, World& w, int r) {
  cclComm_t comm = w.comm[r];
  // cclCommSetCompression with parameters the header says are invalid: refused, and the
  // communicator keeps its codec (later checked calls would show a change).
  std::string why;
  cclCompression_t c = invalidCompression(g, &why);
  expectRefused("cclCommSetCompression(" + why + ")",
                call("cclCommSetCompression", [&] { return cclCommSetCompression(comm, &c); }));
}

void tryBadInit(Rng& g, World&, int) {
  // Init arguments refused before any rendezvous.
  cclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  for (auto& ch : id.internal) ch = static_cast<char>(g.below(256));
  cclComm_t out = reinterpret_cast<cclComm_t>(0x2);
  const uint64_t k = g.below(4);
  const int nr = k == 0 ? (g.chance(0.5) ? 0 : -static_cast<int>(g.below(5)) - 1) : 1 + static_cast<int>(g.below(4));
  const int rk = k == 1 ? (g.chance(0.5) ? nr : -1) : 0;
  const cclResult_t rc =
      k == 3 ? call("cclCommInitRank", [&] { return cclCommInitRank(nullptr, 1, id, 0); })
             : call("cclCommInitRank", [&] { return cclCommInitRank(&out, nr, id, rk); });  // bad sizes or id
  if (rc == cclSuccess) {
    problem("cclCommInitRank accepted nranks " + std::to_string(nr) + " rank " + std::to_string(rk) +
            " with a random id");
    if (k != 3) call("cclCommDestroy", [&] { return cclCommDestroy(out); });
  } else if (k != 3 && out != nullptr) {
    problem("cclCommInitRank failed but left *comm non-NULL");
  }
}

void tryBadInitAll(Rng& g, World&, int) {
  cclComm_t out[2] = {reinterpret_cast<cclComm_t>(0x3), reinterpret_cast<cclComm_t>(0x3)};
  const bool nullComms = g.chance(0.3);
  const int ndev = nullComms ? 2 : (g.chance(0.5) ? 0 : -static_cast<int>(1 + g.below(100)));
  expectRefused("cclCommInitAll(bad)",
                call("cclCommInitAll", [&] { return cclCommInitAll(nullComms ? nullptr : out, ndev, nullptr); }));
  // NULL-filled where there is an array of ndev > 0 handles, untouched where there is none.
  const cclComm_t want = !nullComms && ndev > 0 ? nullptr : reinterpret_cast<cclComm_t>(0x3);
  if (out[0] != want) problem("cclCommInitAll failed but did not leave *comms NULL (or untouched without an array)");
  expectRefused("cclGetUniqueId(NULL)", call("cclGetUniqueId", [] { return cclGetUniqueId(nullptr); }));
}

void tryBadConfig(Rng& g, World&, int) {
  // An invalid configuration is refused before the rendezvous (this id is never joined).
  cclConfig_t c = CCL_CONFIG_INITIALIZER;
  std::string why, text;
  cclCompression_t cmp = invalidCompression(g, &why);
  switch (g.below(7)) {
    case 0:
      c.magic ^= 1u << g.below(32);
      why = "config magic";
      break;
    case 1:
      c.size = g.below(offsetof(cclConfig_t, blocking));
      why = "config size";
      break;
    case 2:
      c.blocking = g.chance(0.5) ? 2 : -1;
      why = "blocking";
      break;
    case 3:
      c.timeoutMs = g.chance(0.5) ? 0 : -static_cast<int>(1 + g.below(1000));
      why = "timeoutMs";
      break;
    case 4:
      text = g.chance(0.3) ? "" : g.chance(0.5) ? std::string(256, 'h') : "host\nname";
      c.hostId = text.c_str();
      why = "hostId text";
      break;
    case 5:
      c.compression = &cmp;
      why = "config compression: " + why;
      break;
    default:
      c.intraCompression = &cmp;
      why = "config intraCompression: " + why;
      break;
  }
  cclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  cclComm_t out = reinterpret_cast<cclComm_t>(0x4);
  expectRefused("cclCommInitRankConfig(" + why + ")",
                call("cclCommInitRankConfig", [&] { return cclCommInitRankConfig(&out, 1, id, 0, &c); }));
  if (out != nullptr) problem("cclCommInitRankConfig failed but left *comm non-NULL");
}

void tryRefusedCall(Rng& g, World& w, int r) {
  const int n = w.size();
  cclComm_t comm = w.comm[r];
  // A call the header says must fail, on this rank alone: refused without waiting for
  // peers, with its buffers untouched.
  const Spec s = randomSpec(g, n, true);
  Buffers b;
  build(s, r, n, g, b);
  // A send and its receive go in one group: a refused send must not leave its receive
  // waiting alone.
  const bool p2p = fnInfo(s.fn).base == Base::kSendRecv;
  if (p2p) call("cclGroupStart", [] { return cclGroupStart(); });
  cclResult_t rc = issue(s, b, w, r);
  if (p2p) rc = first(call("cclGroupEnd", [] { return cclGroupEnd(); }), rc);
  if (rc == cclSuccess) {
    problem("accepted a call that must fail: " + describe(s));
    w.tainted = true;
  } else {
    cclResult_t a = cclSuccess;
    call("cclCommGetAsyncError", [&] { return cclCommGetAsyncError(comm, &a); });
    if (a != cclSuccess) {
      problem("a refused call left the communicator failed: " + describe(s));
      w.tainted = true;
    }
    if (!unchanged(b)) problem("refused call wrote its buffers: " + describe(s));
  }
  const std::string hit = guardReport(b, describe(s));
  if (!hit.empty()) problem(hit);
}

}  // namespace apifuzz
