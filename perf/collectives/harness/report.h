// SPDX-License-Identifier: BSD-3-Clause
// The text nccl-tests prints: run parameters, devices, the two-row column header, one
// row per size with out-of-place and in-place results, and the closing summary.
#pragma once

#include <string>
#include <vector>

#include "harness/options.h"

namespace cclperf {

// One measured placement (out-of-place or in-place) of one row.
struct PlacementResult {
  double seconds;
  double algbw;     // GB/s
  double busbw;     // GB/s
  long long wrong;  // -1: not checked
};

void printRunHeader(const Options& o, const std::string& backendLine);
// "# codec ..." lines: the codec's parameters and what the extra columns mean.
void printCodecHeader(const Options& o);
// "#  Rank ..." line of each local rank, gathered to process 0 by the caller.
std::string deviceLines(int firstRank, int nthreads, const std::string& device);
void printDevices(const std::vector<std::string>& perProcessLines);
// `codec`: the three compression columns follow the in-place ones; `device`: then the
// commands and host functions each call enqueued on CUDA streams.
void printTableHeader(bool cputime, bool codec = false, bool device = false);
void printRowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
void printPlacement(const PlacementResult& r);
// The compression columns of one row (both placements together).
struct CodecColumns {
  double rawBytes;  // summed over ranks, timed calls only
  double wireBytes;
  double maxErr;  // over every checked element of every rank
  double sumSq;
  double count;
  double maxExact;
  bool checked;
};
// The commands columns of one row: per call, the most of any rank (-1: not counted).
struct DeviceColumns {
  double commands = -1;
  double hostFunctions = -1;
};
void printRowEnd(const CodecColumns* codec = nullptr, const DeviceColumns* device = nullptr);
void printSummary(long long wrong, double avgBusbw);

// Time as nccl-tests formats it: fewer decimals for longer times.
std::string formatTime(double usec);

}  // namespace cclperf
