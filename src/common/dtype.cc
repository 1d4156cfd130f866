// SPDX-License-Identifier: BSD-3-Clause
#include "common/dtype.h"

namespace ccl {

namespace {
struct TypeInfo {
  size_t size;
  const char* name;
  bool isFloat;
  bool narrowRange;  // averageScalesInputs
};
constexpr TypeInfo kTypes[cclNumTypes] = {
    {1, "int8", false, false},   {1, "uint8", false, false},   {4, "int32", false, false}, {4, "uint32", false, false},
    {8, "int64", false, false},  {8, "uint64", false, false},  {2, "float16", true, true}, {4, "float32", true, false},
    {8, "float64", true, false}, {2, "bfloat16", true, false}, {1, "f8e4m3", true, true},  {1, "f8e5m2", true, true},
};
}  // namespace

size_t dataTypeSize(cclDataType_t t) { return validDataType(t) ? kTypes[t].size : 0; }
const char* dataTypeName(cclDataType_t t) { return validDataType(t) ? kTypes[t].name : "invalid"; }
bool isFloatType(cclDataType_t t) { return validDataType(t) && kTypes[t].isFloat; }
bool averageScalesInputs(cclDataType_t t) { return validDataType(t) && kTypes[t].narrowRange; }

const char* redOpName(cclRedOp_t op) {
  static const char* names[cclNumOps] = {"sum", "prod", "max", "min", "avg"};
  return validRedOp(op) ? names[op] : "invalid";
}

}  // namespace ccl
