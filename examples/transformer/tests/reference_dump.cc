// SPDX-License-Identifier: BSD-3-Clause
// reference_dump FILE: runs one forward and backward of a fixed tiny model and batch and
// writes what reference_check.py needs to recompute both independently with NumPy:
//   i32 layers, channels, heads, maxSeq, vocab, B, T
//   f32 params[P] (parameterLayout order)   i32 tokens[B*T]   i32 targets[B*T]
//   f32 loss   f32 grads[P]
#include <cstdio>
#include <vector>

#include "model.h"
#include "rng.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: reference_dump FILE\n");
    return 2;
  }
  gpt::ModelConfig c;
  c.layers = 2;
  c.channels = 16;
  c.heads = 4;
  c.maxSeq = 8;
  const int B = 3, T = 7;
  gpt::Model<float> m = gpt::makeModel<float>(c, 2024);
  // Non-trivial LayerNorm weights and biases (GPT-2 starts them at 1 and 0).
  gpt::Rng r(5);
  for (const gpt::TensorInfo& t : gpt::parameterLayout(c))
    if (t.rows == 1)
      for (size_t i = 0; i < t.size(); ++i) m.params[t.offset + i] += 0.1f * r.normal();
  std::vector<int> tokens(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i)
    tokens[i] = static_cast<int>(r.next() % 256), targets[i] = static_cast<int>(r.next() % 256);
  const float loss = gpt::forward(m, tokens.data(), targets.data(), B, T);
  gpt::zeroGrads(m);
  gpt::backward(m, tokens.data(), targets.data(), 1.0f);
  std::FILE* f = std::fopen(argv[1], "wb");
  if (!f) return 1;
  const int header[7] = {c.layers, c.channels, c.heads, c.maxSeq, c.vocab, B, T};
  std::fwrite(header, sizeof(int), 7, f);
  std::fwrite(m.params.data(), sizeof(float), m.params.size(), f);
  std::fwrite(tokens.data(), sizeof(int), tokens.size(), f);
  std::fwrite(targets.data(), sizeof(int), targets.size(), f);
  std::fwrite(&loss, sizeof(float), 1, f);
  std::fwrite(m.grads.data(), sizeof(float), m.grads.size(), f);
  return std::fclose(f) == 0 ? 0 : 1;
}
