// An in-process transport for plan tests: ranks are threads sharing one Fabric, sends copy
// eagerly into the receiver's mailbox. It lets the algorithms be checked without a network.
#pragma once

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "transport/transport.h"

namespace ccl::testing {

class Fabric {
 public:
  using Key = std::tuple<int, int, uint64_t>;  // source, destination, tag
  void put(const Key& k, const void* buf, size_t bytes) {
    std::lock_guard<std::mutex> g(mu_);
    auto& q = boxes_[k];
    q.emplace_back(static_cast<const char*>(buf), static_cast<const char*>(buf) + bytes);
  }
  bool take(const Key& k, void* buf, size_t cap, size_t* got) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = boxes_.find(k);
    if (it == boxes_.end() || it->second.empty()) return false;
    std::vector<char> msg = std::move(it->second.front());
    it->second.pop_front();
    if (msg.size() > cap) throw Error(cclInvalidUsage, "message truncated");
    if (!msg.empty()) std::memcpy(buf, msg.data(), msg.size());
    *got = msg.size();
    return true;
  }

 private:
  std::mutex mu_;
  std::map<Key, std::deque<std::vector<char>>> boxes_;
};

class LocalTransport : public transport::Transport {
 public:
  LocalTransport(Fabric& f, int rank, int size) : fabric_(f), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "local"; }

  std::unique_ptr<transport::Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    fabric_.put({rank_, peer, tag}, buf, bytes);
    return std::make_unique<Done>();
  }
  std::unique_ptr<transport::Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    return std::make_unique<Recv>(fabric_, Fabric::Key{peer, rank_, tag}, buf, bytes);
  }
  bool progress() override { return false; }
  bool sharedMemoryLink(int) const override { return false; }
  void abort() override {}
  void abortMismatch() override {}

 private:
  struct Done : transport::Request {
    bool test() override { return true; }
    size_t receivedBytes() const override { return 0; }
  };
  struct Recv : transport::Request {
    Recv(Fabric& f, Fabric::Key k, void* b, size_t c) : fabric(f), key(k), buf(b), cap(c) {}
    bool test() override { return done || (done = fabric.take(key, buf, cap, &got)); }
    size_t receivedBytes() const override { return got; }
    Fabric& fabric;
    Fabric::Key key;
    void* buf;
    size_t cap;
    size_t got = 0;
    bool done = false;
  };
  Fabric& fabric_;
  int rank_, size_;
};

}  // namespace ccl::testing
