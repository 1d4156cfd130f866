// SPDX-License-Identifier: BSD-3-Clause
// One point of the collectives test matrix and the code that runs it on a cached World and
// checks every rank's buffers against the serial reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "collectives/plan/collective_info.h"

namespace ccltest {

using CollKind = ccl::coll::Coll;

// How the matrix calls a collective of the library's table (collectives/plan/collective_info.h):
// through its own function, or in a form the table does not tell apart.
enum class Form : uint8_t {
  kPlain,
  kBcast,             // cclBcast, the in-place broadcast
  kSendRecvRing,      // every rank sends to rank+1 and receives from rank-1, in one group
  kSendRecvAllPairs,  // every rank sends a distinct block to every other rank, in one group
};

struct Coll {
  CollKind kind;
  Form form = Form::kPlain;
  // Implicit: a collective of the table alone is its plain call.
  constexpr Coll(CollKind k, Form f = Form::kPlain) : kind(k), form(f) {}  // NOLINT(google-explicit-constructor)
  bool operator==(const Coll&) const = default;
};
inline constexpr Coll kBcast{CollKind::kBroadcast, Form::kBcast};
inline constexpr Coll kSendRecvRing{CollKind::kSend, Form::kSendRecvRing};
inline constexpr Coll kSendRecvAllPairs{CollKind::kSend, Form::kSendRecvAllPairs};

enum class RootSel { kFirst, kMiddle, kLast };

struct Case {
  Coll coll;
  cclDataType_t dtype;
  cclRedOp_t op;  // reductions only
  size_t count;   // the count argument of the call
  int nranks;
  bool inPlace;
  RootSel root;  // rooted collectives only
  // Bytes the buffers start past an aligned address (1-3: inside an element of 2, 4 or 8
  // bytes, where element loads and stores would be undefined; the library stages them).
  size_t misalign = 0;
};

// Every collective of the table but point-to-point, then the other forms.
const std::vector<Coll>& allColls();
std::string collName(Coll c);
bool isReduction(Coll c);
bool isRooted(Coll c);
// Whether the collective has an in-place form; cclBcast has only that one.
bool hasInPlace(Coll c);
bool hasOutOfPlace(Coll c);
int rootRank(const Case& c);

// "AllReduce_float32_sum_r4_n1000_inplace", usable as a gtest parameter name.
std::string caseName(const Case& c);

// gtest prints parameters with this (found by argument-dependent lookup).
void PrintTo(const Case& c, std::ostream* os);

// Elements of one rank's send and receive buffers as the test allocates them (the same on
// every rank; in place, the larger of the two).
size_t sendElems(const Case& c);
size_t recvElems(const Case& c);

// Runs the case on World::get(c.nranks) and records gtest failures for every wrong
// element, return code or modified input.
void runCase(const Case& c);

}  // namespace ccltest
