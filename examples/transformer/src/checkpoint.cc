// SPDX-License-Identifier: BSD-3-Clause
#include "checkpoint.h"

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "params.h"

namespace gpt {
namespace {

constexpr char kMagic[8] = {'C', 'C', 'L', 'G', 'P', 'T', 'c', 'k'};
constexpr uint32_t kVersion = 2;
// Version 1's header: the one below without the local heads' three fields.
constexpr uint32_t kVersion1HeaderBytes = 72;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t headerBytes;
  int32_t vocab, maxSeq, layers, channels, heads;
  int32_t pad;
  uint64_t step, optimizerSteps, seed, paramCount;
  uint64_t localHeads, localHeadSize, localHeadSteps;
};
static_assert(sizeof(Header) == 96 && offsetof(Header, localHeads) == kVersion1HeaderBytes);

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

void saveCheckpoint(const std::string& path, const Checkpoint& c) {
  const size_t P = c.params.size();
  if (c.m.size() != P || c.v.size() != P) throw std::logic_error("checkpoint: optimiser state of another size");
  if (c.heads.size() != 3 * c.localHeads * c.localHeadSize) throw std::logic_error("checkpoint: local heads' size");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.headerBytes = sizeof(Header);
  h.vocab = c.config.vocab, h.maxSeq = c.config.maxSeq, h.layers = c.config.layers;
  h.channels = c.config.channels, h.heads = c.config.heads;
  h.step = c.step, h.optimizerSteps = c.optimizerSteps, h.seed = c.seed, h.paramCount = P;
  h.localHeads = c.localHeads, h.localHeadSize = c.localHeadSize, h.localHeadSteps = c.localHeadSteps;
  std::vector<uint8_t> bytes(sizeof(h) + (3 * P + c.heads.size()) * sizeof(float));
  uint8_t* at = bytes.data();
  std::memcpy(at, &h, sizeof(h));
  at += sizeof(h);
  for (const std::vector<float>* t : {&c.params, &c.m, &c.v, &c.heads}) {
    if (t->empty()) continue;  // no memcpy from a null pointer
    std::memcpy(at, t->data(), t->size() * sizeof(float));
    at += t->size() * sizeof(float);
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
  if (bytes.size() < kVersion1HeaderBytes + sizeof(uint64_t)) fail("too short to be a checkpoint");
  std::memcpy(&h, bytes.data(), kVersion1HeaderBytes);
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) fail("not a checkpoint of this trainer (bad magic)");
  if (h.version != 1 && h.version != kVersion)
    fail("version " + std::to_string(h.version) + ", this trainer reads 1 and " + std::to_string(kVersion));
  const size_t header = h.version == 1 ? kVersion1HeaderBytes : sizeof(h);
  if (h.headerBytes != header) fail("header of " + std::to_string(h.headerBytes) + " bytes");
  if (bytes.size() < header + sizeof(uint64_t)) fail("truncated: " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&h, bytes.data(), header);
  const size_t body = bytes.size() - sizeof(uint64_t);
  // Each count is checked against the file's length before any product of them is formed.
  const uint64_t room = (body - header) / sizeof(float);
  if (h.paramCount > room / 3 || h.localHeadSize > room / 3 ||
      (h.localHeadSize > 0 && h.localHeads > room / 3 / h.localHeadSize) ||
      header + (3 * h.paramCount + 3 * h.localHeads * h.localHeadSize) * sizeof(float) != body)
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
  c.localHeads = h.localHeads, c.localHeadSize = h.localHeadSize, c.localHeadSteps = h.localHeadSteps;
  const uint8_t* at = bytes.data() + header;
  for (std::vector<float>* t : {&c.params, &c.m, &c.v, &c.heads}) {
    t->resize(t == &c.heads ? 3 * h.localHeads * h.localHeadSize : h.paramCount);
    if (t->empty()) continue;
    std::memcpy(t->data(), at, t->size() * sizeof(float));
    at += t->size() * sizeof(float);
  }
  return c;
}

}  // namespace gpt
