// SPDX-License-Identifier: BSD-3-Clause
// One rank of a Gloo fp32 sum allreduce over Gloo's TCP transport, bound to the -a
// address, meeting the other ranks through a FileStore in the -f directory.
// -v ring: gloo::AllreduceRing (the whole buffer travels n-1 hops);
// -v ring_chunked: gloo::AllreduceRingChunked (reduce-scatter + allgather, bandwidth-optimal).
// Debian's gloo::allreduce(AllreduceOptions) is not used: it stalls with 3 or more ranks.
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

std::shared_ptr<gloo::Context> connect(const slowlink::Options& o) {
  if (o.rendezvous.empty() || o.address.empty())
    throw std::runtime_error("-f <store dir> and -a <address> are required");
  gloo::transport::tcp::attr attr;
  attr.hostname = o.address;
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.nranks);
  context->setTimeout(std::chrono::milliseconds(static_cast<long>(o.timeoutSeconds * 1000)));
  gloo::rendezvous::FileStore store(o.rendezvous);
  context->connectFullMesh(store, device);
  return context;
}

std::unique_ptr<gloo::Algorithm> makeAllreduce(const slowlink::Options& o,
                                               const std::shared_ptr<gloo::Context>& context, float* data, int count) {
  const std::vector<float*> ptrs{data};
  if (o.variant == "ring") return std::make_unique<gloo::AllreduceRing<float>>(context, ptrs, count);
  if (o.variant == "ring_chunked") return std::make_unique<gloo::AllreduceRingChunked<float>>(context, ptrs, count);
  throw std::runtime_error("-v must be ring or ring_chunked, not " + o.variant);
}

void run(const slowlink::Options& o) {
  const std::size_t count = slowlink::elementCount(o);
  if (count > std::size_t(1) << 30) throw std::runtime_error("-b: Gloo takes an int count; at most 1G elements");
  std::vector<float> input(count), data(count);
  slowlink::fillInput(o.rank, input.data(), count);

  auto context = connect(o);
  auto allreduce = makeAllreduce(o, context, data.data(), int(count));
  gloo::BarrierAllToOne barrierAlgorithm(context);
  auto barrier = [&] { barrierAlgorithm.run(); };
  // Gloo reduces in place: every call starts from a fresh copy of the input, outside the timing.
  auto refill = [&] { std::memcpy(data.data(), input.data(), count * sizeof(float)); };

  for (int i = 0; i < o.warmup; ++i) refill(), allreduce->run();
  double seconds = 0;
  for (int i = 0; i < o.iters; ++i) {
    refill();
    seconds += slowlink::timeCall(barrier, [&] { allreduce->run(); });
  }
  // Nobody leaves while a neighbour is still inside its last call: Gloo reports a peer that
  // closes its socket early as an error on the ranks still reading from it.
  barrier();
  const double ringBytes =
      o.variant == "ring" ? double(o.nranks - 1) * o.bytes : 2.0 * (o.nranks - 1) / o.nranks * double(o.bytes);
  slowlink::reportResult(o, "gloo", seconds / o.iters, ringBytes, -1, data.data());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(slowlink::parseOptions(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_bench: %s\n", e.what());
    return 1;
  }
}
