// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/stats_summary.h"

#include <string>

#include "common/log.h"

namespace ccl::nccl {

void logStatsSummary(cclComm_t comm, int rank, int nranks) {
  if (!comm || !log::enabled(log::Level::kInfo)) return;
  log::RankScope scope(rank);
  cclStats_t stats = CCL_STATS_INITIALIZER;
  if (cclCommGetStats(comm, &stats) != cclSuccess) {
    CCL_WARN("NCCL face: the communicator's counters could not be read: %s", cclGetLastError(comm));
    return;
  }
  for (int k = 0; k < cclNumOpKinds; ++k) {
    const cclOpStats_t& s = stats.op[k];
    if (s.calls == 0) continue;
    const double ratio = s.rawBytes == 0 ? 1.0 : static_cast<double>(s.wireBytes) / static_cast<double>(s.rawBytes);
    CCL_INFO(
        "NCCL face: stats %s rank=%d nranks=%d calls=%llu compressed=%llu raw=%llu wire=%llu ratio=%.4f codec_s=%.6f "
        "auto=%llu auto_compressed=%llu",
        cclOpKindName(static_cast<cclOpKind_t>(k)), rank, nranks, s.calls, s.compressedCalls, s.rawBytes, s.wireBytes,
        ratio, s.codecSeconds, stats.autoChosen[k], stats.autoCompressed[k]);
  }
  // Calls the default codec left uncompressed (device calls sent to NVIDIA's NCCL as they
  // are among them), by reason: nothing goes uncompressed without a count.
  std::string why;
  for (int r = 0; r < cclNumUncompressedReasons; ++r)
    if (stats.uncompressed[r])
      why += std::string(" ") + cclUncompressedReasonName(static_cast<cclUncompressedReason_t>(r)) + "=" +
             std::to_string(stats.uncompressed[r]);
  if (!why.empty()) CCL_INFO("NCCL face: uncompressed rank=%d nranks=%d%s", rank, nranks, why.c_str());
  if (stats.acrossRawBytes)
    CCL_INFO("NCCL face: across nodes rank=%d nranks=%d raw=%llu wire=%llu", rank, nranks, stats.acrossRawBytes,
             stats.acrossWireBytes);
}

}  // namespace ccl::nccl
