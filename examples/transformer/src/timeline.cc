// SPDX-License-Identifier: BSD-3-Clause
#include "timeline.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace gpt {

const char* spanKindName(SpanKind k) {
  static const char* names[] = {"forward", "backward", "update", "comm", "codec", "async"};
  return names[static_cast<size_t>(k)];
}

void writeChromeTrace(const std::string& path, const std::vector<std::vector<Span>>& spans,
                      const std::vector<RankPlace>& places, const char* (*siteName)(int)) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("--trace: cannot write " + path);
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& rank : spans)
    for (const Span& s : rank) origin = std::min(origin, s.start);
  std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  bool first = true;
  auto sep = [&] {
    if (!first) std::fprintf(f, ",\n");
    first = false;
  };
  // Thread rows: compute (forward, backward, update), communication, codec, asynchronous
  // communication.
  static const char* rows[] = {"compute", "communication", "codec", "asynchronous communication"};
  auto row = [](SpanKind k) {
    return k == SpanKind::kComm ? 1 : k == SpanKind::kCodec ? 2 : k == SpanKind::kAsync ? 3 : 0;
  };
  for (const RankPlace& p : places) {
    sep();
    std::fprintf(f,
                 "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d (dp %d, pp %d, tp "
                 "%d)\"}}",
                 p.rank, p.rank, p.dp, p.pp, p.tp);
    sep();
    std::fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}", p.rank,
                 p.rank);
    for (int t = 0; t < 4; ++t) {
      sep();
      std::fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                   p.rank, t, rows[t]);
    }
  }
  for (size_t r = 0; r < spans.size(); ++r) {
    for (const Span& s : spans[r]) {
      const bool onSite = s.kind == SpanKind::kComm || s.kind == SpanKind::kCodec || s.kind == SpanKind::kAsync;
      std::string name = onSite ? siteName(s.site) : spanKindName(s.kind);
      if (s.kind == SpanKind::kAsync) name += " async";
      if (s.kind == SpanKind::kCodec) name += " codec";
      if (s.microbatch >= 0 && (s.kind == SpanKind::kForward || s.kind == SpanKind::kBackward)) {
        name += ' ';
        name += std::to_string(s.microbatch);
      }
      sep();
      std::fprintf(f,
                   "{\"ph\":\"X\",\"pid\":%zu,\"tid\":%d,\"name\":\"%s\",\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f,"
                   "\"args\":{\"step\":%d,\"microbatch\":%d,\"layer\":%d,\"phase\":%d}}",
                   r, row(s.kind), name.c_str(), spanKindName(s.kind), (s.start - origin) * 1e6,
                   (s.end - s.start) * 1e6, s.step, s.microbatch, s.layer, s.phase);
    }
  }
  std::fprintf(f, "\n]}\n");
  if (std::fclose(f) != 0) throw std::runtime_error("--trace: writing " + path + " failed");
}

}  // namespace gpt
