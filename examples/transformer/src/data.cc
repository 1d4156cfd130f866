// SPDX-License-Identifier: BSD-3-Clause
#include "data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "rng.h"

namespace gpt {
namespace {

constexpr char kMagic[8] = {'C', 'C', 'L', 'T', 'O', 'K', '0', '1'};
constexpr uint32_t kVersion = 1;

struct TokenHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t total;
  uint64_t trainCount;
};

double mtime(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

std::vector<uint8_t> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("data: cannot open " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) throw std::runtime_error("data: " + path + " is empty");
  return bytes;
}

// Writes the token file next to the text, through a temporary file and a rename, so that
// ranks reading concurrently see either no file or a whole one.
void writeTokens(const std::string& path, const std::vector<uint8_t>& bytes) {
  TokenHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.total = bytes.size();
  h.trainCount = bytes.size() * 9 / 10;
  // Unique per process and thread: ranks that are threads may all be making the file.
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(static_cast<long long>(::getpid())) + "." + std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("data: cannot write " + tmp);
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("data: writing " + tmp + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("data: cannot rename " + tmp);
}

Corpus readTokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TokenHeader h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof(h)) || std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 ||
      h.version != kVersion || h.trainCount > h.total)
    throw std::runtime_error("data: " + path + " is not a token file of this version (delete it to remake it)");
  std::vector<uint8_t> all(h.total);
  if (!in.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(h.total)))
    throw std::runtime_error("data: " + path + " is truncated (delete it to remake it)");
  Corpus c;
  c.train.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(h.trainCount));
  c.val.assign(all.begin() + static_cast<std::ptrdiff_t>(h.trainCount), all.end());
  return c;
}

}  // namespace

Corpus loadCorpus(const std::string& textPath, size_t minTokens) {
  const double textTime = mtime(textPath);
  if (textTime < 0) throw std::runtime_error("data: " + textPath + " does not exist");
  const std::string tokenPath = textPath + ".tokens";
  if (mtime(tokenPath) < textTime) writeTokens(tokenPath, readText(textPath));
  Corpus c = readTokens(tokenPath);
  if (c.train.size() < minTokens || c.val.size() < minTokens)
    throw std::runtime_error("data: " + textPath + " is too short: its splits hold " + std::to_string(c.train.size()) +
                             " and " + std::to_string(c.val.size()) + " tokens, each needs at least " +
                             std::to_string(minTokens) + " (one sequence and its target)");
  return c;
}

namespace {

void appendWindow(const std::vector<uint8_t>& split, size_t start, int Tn, Batch& out) {
  for (int t = 0; t < Tn; ++t) {
    out.tokens.push_back(split[start + static_cast<size_t>(t)]);
    out.targets.push_back(split[start + static_cast<size_t>(t) + 1]);
  }
}

}  // namespace

void appendTrainSequence(const Corpus& c, uint64_t seed, uint64_t step, uint64_t index, int Tn, Batch& out) {
  const size_t starts = c.train.size() - static_cast<size_t>(Tn);  // windows of Tn + 1 tokens
  appendWindow(c.train, mixKey(seed, step, index) % starts, Tn, out);
}

void appendValSequence(const Corpus& c, uint64_t index, uint64_t count, int Tn, Batch& out) {
  const size_t starts = c.val.size() - static_cast<size_t>(Tn);
  appendWindow(c.val, count > 1 ? static_cast<size_t>(index * (starts - 1) / (count - 1)) : 0, Tn, out);
}

double unigramEntropy(const std::vector<uint8_t>& tokens) {
  double counts[256] = {};
  for (uint8_t t : tokens) counts[t] += 1;
  double h = 0;
  const double n = static_cast<double>(tokens.size());
  for (double k : counts)
    if (k > 0) h -= k / n * std::log(k / n);
  return h;
}

}  // namespace gpt
