// SPDX-License-Identifier: BSD-3-Clause
#include "checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "params.h"

namespace gpt {
namespace {

constexpr char kMagic[8] = {'C', 'C', 'L', 'G', 'P', 'T', 'c', 'k'};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t headerBytes;
  int32_t vocab, maxSeq, layers, channels, heads;
  int32_t pad;
  uint64_t step, optimizerSteps, seed, paramCount;
};

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

void saveCheckpoint(const std::string& path, const Checkpoint& c) {
  const size_t P = c.params.size();
  if (c.m.size() != P || c.v.size() != P) throw std::logic_error("checkpoint: optimiser state of another size");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.headerBytes = sizeof(Header);
  h.vocab = c.config.vocab, h.maxSeq = c.config.maxSeq, h.layers = c.config.layers;
  h.channels = c.config.channels, h.heads = c.config.heads;
  h.step = c.step, h.optimizerSteps = c.optimizerSteps, h.seed = c.seed, h.paramCount = P;
  std::vector<uint8_t> bytes(sizeof(h) + 3 * P * sizeof(float));
  uint8_t* at = bytes.data();
  std::memcpy(at, &h, sizeof(h));
  at += sizeof(h);
  for (const std::vector<float>* t : {&c.params, &c.m, &c.v}) {
    std::memcpy(at, t->data(), P * sizeof(float));
    at += P * sizeof(float);
  }
  const uint64_t check = fnv1a(bytes.data(), bytes.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("checkpoint: cannot write " + tmp);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.write(reinterpret_cast<const char*>(&check), sizeof(check));
    out.flush();
    if (!out) throw std::runtime_error("checkpoint: writing " + tmp + " failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("checkpoint: cannot rename " + tmp);
}

Checkpoint loadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint: cannot open " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& why) { throw std::runtime_error("checkpoint " + path + ": " + why); };
  Header h{};
  if (bytes.size() < sizeof(h) + sizeof(uint64_t)) fail("too short to be a checkpoint");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) fail("not a checkpoint of this trainer (bad magic)");
  if (h.version != kVersion)
    fail("version " + std::to_string(h.version) + ", this trainer reads " + std::to_string(kVersion));
  if (h.headerBytes != sizeof(h)) fail("header of " + std::to_string(h.headerBytes) + " bytes");
  const size_t body = bytes.size() - sizeof(uint64_t);
  if (h.paramCount > body / sizeof(float) || sizeof(h) + 3 * h.paramCount * sizeof(float) != body)
    fail("truncated or padded: " + std::to_string(bytes.size()) + " bytes for " + std::to_string(h.paramCount) +
         " parameters");
  uint64_t check;
  std::memcpy(&check, bytes.data() + body, sizeof(check));
  if (check != fnv1a(bytes.data(), body)) fail("checksum mismatch (corrupt file)");
  Checkpoint c;
  c.config.vocab = h.vocab, c.config.maxSeq = h.maxSeq, c.config.layers = h.layers;
  c.config.channels = h.channels, c.config.heads = h.heads;
  const std::string problem = configProblem(c.config);
  if (!problem.empty()) fail("impossible model: " + problem);
  if (parameterCount(c.config) != h.paramCount) fail("parameter count does not match its model");
  c.step = h.step, c.optimizerSteps = h.optimizerSteps, c.seed = h.seed;
  const uint8_t* at = bytes.data() + sizeof(h);
  for (std::vector<float>* t : {&c.params, &c.m, &c.v}) {
    t->resize(h.paramCount);
    std::memcpy(t->data(), at, h.paramCount * sizeof(float));
    at += h.paramCount * sizeof(float);
  }
  return c;
}

}  // namespace gpt
