// SPDX-License-Identifier: BSD-3-Clause
// What both launchers share: detecting an MPI launch and running ranks as threads.
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launch.h"

namespace gpt {

bool launchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* s = std::getenv(v);
    if (s && std::atoi(s) > 1) return true;
  }
  return false;
}

void runThreadRanks(int threads, const std::function<void(cclComm_t, int)>& fn) {
  std::vector<cclComm_t> comms(static_cast<size_t>(threads), nullptr);
  if (cclCommInitAll(comms.data(), threads, nullptr) != cclSuccess)
    throw std::runtime_error(std::string("cclCommInitAll: ") + cclGetLastError(nullptr));
  // The first failure is the cause; the others are peers noticing its abort.
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> workers;
  for (int r = 0; r < threads; ++r)
    workers.emplace_back([&, r] {
      try {
        fn(comms[static_cast<size_t>(r)], r);
      } catch (...) {
        {
          std::lock_guard<std::mutex> g(mu);
          if (!first) first = std::current_exception();
        }
        cclCommAbort(comms[static_cast<size_t>(r)]);  // peers' collectives fail instead of waiting
        comms[static_cast<size_t>(r)] = nullptr;
      }
    });
  for (std::thread& t : workers) t.join();
  for (cclComm_t c : comms)
    if (c) cclCommDestroy(c);
  if (first) std::rethrow_exception(first);
}

}  // namespace gpt
