// SPDX-License-Identifier: BSD-3-Clause
#include "bench_common.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace slowlink {
namespace {

double parseNumber(const std::string& flag, const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text) throw std::runtime_error("flag " + flag + ": not a number: " + text);
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024.0, ++end;
  if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024.0, ++end;
  if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024.0 * 1024.0, ++end;
  if (*end != '\0') throw std::runtime_error("flag " + flag + ": trailing characters in " + text);
  return value * scale;
}

void validate(const Options& o) {
  if (o.nranks < 1) throw std::runtime_error("-n: need at least one rank");
  if (o.rank < 0 || o.rank >= o.nranks) throw std::runtime_error("-r: rank out of range");
  if (o.bytes < sizeof(float) || o.bytes % sizeof(float) != 0)
    throw std::runtime_error("-b: bytes must be a positive multiple of 4");
  if (o.iters < 1 || o.warmup < 0) throw std::runtime_error("-i must be >= 1 and -w >= 0");
}

// splitmix64: a cheap, well-mixed hash of (rank, index).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float inputValue(int rank, std::size_t index) {
  const std::uint64_t h = mix((std::uint64_t(rank) << 40) ^ index);
  return float(double(h >> 40) / double(1ull << 24) * 2.0 - 1.0);
}

}  // namespace

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("flag " + flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "-r")
      o.rank = int(parseNumber(flag, value));
    else if (flag == "-n")
      o.nranks = int(parseNumber(flag, value));
    else if (flag == "-b")
      o.bytes = std::size_t(parseNumber(flag, value));
    else if (flag == "-i")
      o.iters = int(parseNumber(flag, value));
    else if (flag == "-w")
      o.warmup = int(parseNumber(flag, value));
    else if (flag == "-f")
      o.rendezvous = value;
    else if (flag == "-a")
      o.address = value;
    else if (flag == "-v")
      o.variant = value;
    else if (flag == "-e")
      o.maxRelErr = parseNumber(flag, value);
    else if (flag == "-t")
      o.timeoutSeconds = parseNumber(flag, value);
    else
      throw std::runtime_error("unknown flag " + flag);
  }
  // MPI fills rank and size itself; let it validate after that.
  if (o.rank >= 0) validate(o);
  return o;
}

std::size_t elementCount(const Options& o) { return o.bytes / sizeof(float); }

void fillInput(int rank, float* data, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) data[i] = inputValue(rank, i);
}

double relativeError(const float* result, int nranks, std::size_t count) {
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < nranks; ++r) exact += double(inputValue(r, i));
    const double d = double(result[i]) - exact;
    diff2 += d * d;
    ref2 += exact * exact;
  }
  return std::sqrt(diff2 / ref2);
}

void reportResult(const Options& o, const std::string& impl, double meanSeconds, double wireBytesPerCall,
                  double codecSecondsPerCall, const float* result) {
  double relErr = -1;
  if (o.rank == 0) relErr = relativeError(result, o.nranks, elementCount(o));
  std::printf(
      "RESULT impl=%s variant=%s rank=%d nranks=%d bytes=%zu iters=%d seconds=%.6f wire_bytes=%.0f codec_seconds=%.6f "
      "relerr=%.3e\n",
      impl.c_str(), o.variant.c_str(), o.rank, o.nranks, o.bytes, o.iters, meanSeconds, wireBytesPerCall,
      codecSecondsPerCall, relErr);
  std::fflush(stdout);
  if (o.rank == 0 && !(relErr <= o.maxRelErr))
    throw std::runtime_error("relative error " + std::to_string(relErr) + " exceeds the bound " +
                             std::to_string(o.maxRelErr));
}

std::vector<char> waitForFile(const std::string& path, std::size_t bytes, double timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> data(bytes);
    if (in && in.read(data.data(), std::streamsize(bytes)) && in.gcount() == std::streamsize(bytes)) return data;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("timed out waiting for " + path);
}

void writeFileAtomically(const std::string& path, const void* data, std::size_t bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), std::streamsize(bytes));
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
}

}  // namespace slowlink
