// SPDX-License-Identifier: BSD-3-Clause
// What both launchers share: detecting an MPI launch, running ranks as threads, and one
// rank per process with the unique id in a file.
#include <unistd.h>

#include <chrono>
#include <cstdio>
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

namespace {

int environmentInt(const char* name) {
  const char* s = std::getenv(name);
  char* end = nullptr;
  const long v = s ? std::strtol(s, &end, 10) : -1;
  if (!s || *end != '\0' || v < 0 || v > 1 << 20)
    throw std::invalid_argument(std::string("--rendezvous needs ") + name + " in the environment (a number)");
  return static_cast<int>(v);
}

}  // namespace

void runEnvironmentRank(const std::string& idFile, const std::function<void(cclComm_t, int)>& fn) {
  const int rank = environmentInt("RANK"), size = environmentInt("WORLD_SIZE");
  if (rank >= size) throw std::invalid_argument("RANK must be below WORLD_SIZE");
  cclUniqueId id{};
  if (rank == 0) {
    if (cclGetUniqueId(&id) != cclSuccess)
      throw std::runtime_error(std::string("cclGetUniqueId: ") + cclGetLastError(nullptr));
    const std::string tmp = idFile + ".tmp" + std::to_string(getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    const bool written = f && std::fwrite(&id, sizeof(id), 1, f) == 1;
    if (f) std::fclose(f);
    if (!written || std::rename(tmp.c_str(), idFile.c_str()) != 0)
      throw std::runtime_error("--rendezvous: cannot write " + idFile);
  } else {
    const char* t = std::getenv("CCL_TIMEOUT");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(t ? std::atoi(t) : 300);
    for (;;) {
      std::FILE* f = std::fopen(idFile.c_str(), "rb");
      const bool read = f && std::fread(&id, sizeof(id), 1, f) == 1;
      if (f) std::fclose(f);
      if (read) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("--rendezvous: rank 0 wrote no id to " + idFile + " within CCL_TIMEOUT");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  cclComm_t comm = nullptr;
  if (cclCommInitRank(&comm, size, id, rank) != cclSuccess)
    throw std::runtime_error(std::string("cclCommInitRank: ") + cclGetLastError(nullptr));
  try {
    fn(comm, rank);
  } catch (...) {
    cclCommAbort(comm);
    throw;
  }
  cclCommDestroy(comm);
}

}  // namespace gpt
