// SPDX-License-Identifier: BSD-3-Clause
// A transport that forwards every call to another: tests derive from it and change one
// behaviour (a receive declined in place, a digest held back) over a real transport.
#pragma once

#include <memory>
#include <utility>

#include "transport/transport.h"

namespace ccltest {

class ForwardingTransport : public ccl::transport::Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<ccl::transport::Transport> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* name() const override { return inner_->name(); }
  std::unique_ptr<ccl::transport::Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    return inner_->isend(peer, tag, buf, bytes);
  }
  std::unique_ptr<ccl::transport::Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    return inner_->irecv(peer, tag, buf, bytes);
  }
  bool progress() override { return inner_->progress(); }
  bool sharedMemoryLink(int peer) const override { return inner_->sharedMemoryLink(peer); }
  void abort() override { inner_->abort(); }
  void abortMismatch() override { inner_->abortMismatch(); }
  void peerLost(int peer) override { inner_->peerLost(peer); }
  AbortState abortState() const override { return inner_->abortState(); }

 private:
  std::unique_ptr<ccl::transport::Transport> inner_;
};

}  // namespace ccltest
