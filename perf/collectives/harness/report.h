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

void printRunHeader(const Options& o, const std::string& backend_line);
// "#  Rank ..." line of each local rank, gathered to process 0 by the caller.
std::string deviceLines(int first_rank, int nthreads, const std::string& device);
void printDevices(const std::vector<std::string>& per_process_lines);
void printTableHeader(bool cputime);
void printRowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
void printPlacement(const PlacementResult& r);
void printRowEnd();
void printSummary(long long wrong, double avg_busbw);

// Time as nccl-tests formats it: fewer decimals for longer times.
std::string formatTime(double usec);

}  // namespace cclperf
