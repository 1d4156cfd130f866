// SPDX-License-Identifier: BSD-3-Clause
// The names of the library's enums and their counts, read from the tables that own them
// (collective_info.h, algorithms.cc; codecs: codec.cc), so that bindings build their enums
// from the library they load instead of keeping copies that lag it.
#include <iterator>
#include <string>

#include "api/comm.h"
#include "api/compression.h"
#include "codecs/codec.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/plan/collective_info.h"

extern "C" {

CCL_API const char* cclOpKindName(cclOpKind_t kind) {
  const auto k = static_cast<unsigned>(kind);
  return k < static_cast<unsigned>(cclNumOpKinds) ? ccl::coll::collInfo(static_cast<ccl::coll::Coll>(k)).name
                                                  : "invalid";
}

CCL_API cclResult_t cclOpKindFromName(const char* name, cclOpKind_t* kind) {
  return ccl::api::guard(nullptr, "cclOpKindFromName", [&] {
    CCL_CHECK(name && kind, cclInvalidArgument, "name or kind is NULL");
    ccl::coll::Coll c;
    CCL_CHECK(ccl::coll::collFromName(name, &c), cclInvalidArgument,
              std::string("'") + name + "' is not an operation's name");
    *kind = ccl::coll::collInfo(c).op;
  });
}

CCL_API int cclOpKindCount(void) { return cclNumOpKinds; }

CCL_API const char* cclUncompressedReasonName(cclUncompressedReason_t reason) {
  static constexpr const char* kNames[] = {"not_listed", "collective", "one_node", "auto",  "small", "dtype",
                                           "op",         "capture",    "feedback", "bound", "stream"};
  static_assert(std::size(kNames) == cclNumUncompressedReasons);
  const auto k = static_cast<unsigned>(reason);
  return k < std::size(kNames) ? kNames[k] : "invalid";
}

CCL_API int cclUncompressedReasonCount(void) { return cclNumUncompressedReasons; }

CCL_API cclResult_t cclCodecFromName(const char* name, cclCodec_t* codec) {
  return ccl::api::guard(nullptr, "cclCodecFromName", [&] {
    CCL_CHECK(name && codec, cclInvalidArgument, "name or codec is NULL");
    CCL_CHECK(ccl::codec::codecFromName(name, codec), cclInvalidArgument,
              std::string("'") + name + "' is not a codec's name");
  });
}

CCL_API cclResult_t cclCompressListParse(const char* list, unsigned int* mask) {
  return ccl::api::guard(nullptr, "cclCompressListParse", [&] {
    CCL_CHECK(list && mask, cclInvalidArgument, "list or mask is NULL");
    *mask = ccl::api::parseCompressList(list);
  });
}

CCL_API const char* cclAlgorithmName(int algorithm) {
  return algorithm >= 0 && algorithm < ccl::coll::kNumAlgos
             ? ccl::coll::algoName(static_cast<ccl::coll::Algo>(algorithm))
             : "invalid";
}

CCL_API cclResult_t cclAlgorithmFromName(const char* name, int* algorithm) {
  return ccl::api::guard(nullptr, "cclAlgorithmFromName", [&] {
    CCL_CHECK(name && algorithm, cclInvalidArgument, "name or algorithm is NULL");
    *algorithm = static_cast<int>(ccl::coll::parseAlgo(name));
  });
}

CCL_API int cclAlgorithmCount(void) { return ccl::coll::kNumAlgos; }

}  // extern "C"
