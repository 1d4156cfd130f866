// SPDX-License-Identifier: BSD-3-Clause
// One communicator's UCP worker and its endpoints, shared by the transport and its
// requests. Only the thread driving the communicator touches UCX; abort() from another
// thread merely sets a flag that the driving thread acts on at its next call.
#pragma once

#include <ucp/api/ucp.h>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/tags.h"

namespace ccl::transport::ucx {

// The UCP tag of a message: the source rank above the caller's tag, so a receive names its
// source; the control bit marks the transport's own messages (abort notices). common/tags.h
// lays the bits out.
constexpr int kMaxRanks = 1 << tags::kSourceBits;
constexpr ucp_tag_t kControlBit = tags::kControlBit;
using tags::wireTag;

// Who a rank is, so that peers can tell whether it shares their host (and its processes).
struct PeerInfo {
  uint64_t hostId;  // boot id, host name and pid namespace
  int64_t pid;
  uint64_t sharedMemory;  // 1 when this process's UCX context has a shared-memory transport
  static PeerInfo local();
};

class Worker {
 public:
  Worker(int rank, int size);
  ~Worker();  // closes endpoints (bounded flush, then forced) and destroys the worker
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // This worker's address, to be exchanged through the bootstrap.
  std::vector<uint8_t> address() const;
  // Creates the endpoint to every rank (including this one) from their addresses.
  //
  // UCX 1.13's shared-memory transports cannot report a failed peer, and an endpoint that
  // asks for UCP_ERR_HANDLING_MODE_PEER silently falls back to TCP. So by default
  // (CCL_UCX_ERR_MODE=auto) peers on this host get no UCX error handling, and this worker
  // watches their processes instead; peers on other hosts use UCP_ERR_HANDLING_MODE_PEER.
  void connect(const std::vector<std::vector<uint8_t>>& addresses, const std::vector<PeerInfo>& peers);

  ucp_worker_h handle() const { return worker_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The endpoint to `peer`, or null once it failed or was closed.
  ucp_ep_h endpoint(int peer) const { return eps_[peer]; }
  bool peerFailed(int peer) const { return failed_[peer] != 0; }
  // True when the endpoint to `peer` may use UCX's shared-memory transports: same host,
  // both contexts have them, and no UCX error handling (which would fall back to TCP).
  bool sharedMemoryLink(int peer) const { return shm_[peer] != 0; }

  // One ucp_worker_progress, plus acting on peer failures and a requested abort. Returns
  // true when anything happened.
  bool progress();
  // With `mismatch`, peers learn that the abort reports a usage error (see abortMismatch).
  void requestAbort(bool mismatch = false) {
    if (mismatch) mismatch_.store(true, std::memory_order_relaxed);
    int64_t none = 0;
    abortedAtNs_.compare_exchange_strong(none, nowNs(), std::memory_order_relaxed);
    abortRequested_.store(true, std::memory_order_release);
  }
  // When the abort was requested (steady clock), or the epoch when it was not: the pending
  // requests' grace counts from it, so that all of them together wait one grace.
  std::chrono::steady_clock::time_point abortedAt() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::nanoseconds(abortedAtNs_.load(std::memory_order_relaxed)));
  }
  // Transport::peerLost: any thread. A pending send to a lost rank is given up at once.
  void markLost(int peer) {
    if (peer >= 0 && peer < size_) lost_[static_cast<size_t>(peer)].store(true, std::memory_order_relaxed);
  }
  bool lost(int peer) const { return lost_[static_cast<size_t>(peer)].load(std::memory_order_relaxed); }
  // True after abort() here or an abort notice from a peer.
  bool aborted() const { return abortRequested_.load(std::memory_order_acquire); }
  // The rank whose abort notice aborted this worker, or -1 (a local abort, or none).
  int abortedBy() const { return abortedBy_; }
  // True when the abort came from a mismatch found here or by a peer.
  bool abortedForMismatch() const { return mismatch_.load(std::memory_order_relaxed); }
  // Closes the endpoint to `peer` without waiting for it: its pending sends complete with
  // an error and the peer sees this rank as failed.
  void forceClose(int peer);
  // True when nothing more of `peer`'s can reach this worker's receives: its endpoint is
  // closed, after UCX found it failed (a reset, a keepalive timeout) or after the peer's
  // process on this host exited. Not after an abort alone: a live peer stopped in the middle
  // of a message may send the rest when it resumes, and UCX would write it where the receive
  // that matched the message's first fragments pointed.
  bool deliversNoMore(int peer) const { return !eps_[peer] && (epFailed_[peer] || exited_[peer]); }
  // How long a cancelled receive that UCX still holds may keep its caller waiting, while its
  // peer may still deliver (deliversNoMore): CCL_TIMEOUT, at most 30 s.
  std::chrono::milliseconds releaseLimit() const { return releaseLimit_; }

 private:
  struct EpContext {
    Worker* self;
    int peer;
  };
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void onControl(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* self);
  void postControlRecv();
  void cancelControlRecv();
  void applyAbort();
  // Flushes the endpoints of live peers (bounded wait) and force-closes those of failed ones.
  void closeAll();
  void handleEvents();
  void watchPeers();

  int rank_, size_;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<uint8_t> failed_;
  std::vector<EpContext> epContexts_;
  std::vector<pid_t> watched_;     // per peer: a process on this host to watch, or 0
  std::vector<uint8_t> exited_;    // per peer: that process has exited
  std::vector<uint8_t> epFailed_;  // per peer: UCX reported its endpoint failed while it was open
  std::vector<uint8_t> shm_;       // per peer: see sharedMemoryLink
  std::chrono::milliseconds releaseLimit_;
  bool anyWatched_ = false;
  uint32_t progressCalls_ = 0;
  std::chrono::steady_clock::time_point nextWatch_{};
  bool failurePending_ = false;  // the error handler ran; close the failed endpoints
  bool abortApplied_ = false;
  // A peer's abort notice: the same abort spreads to every rank that is waiting, instead of
  // each waiting for its timeout (shared memory cannot report the aborted peer).
  void* controlRequest_ = nullptr;
  // An abort notice: its kind, and the rank that started the abort (a rank that passes a
  // peer's abort on names that peer, so that every rank names the one that aborted, not the
  // first that passed it on); -1: the sender.
  struct Notice {
    uint32_t kind = 0;
    int32_t by = -1;
  };
  Notice controlBuf_;    // the notice received
  Notice noticeSent_;    // this worker's, while its sends may read it
  int noticeFrom_ = -1;  // set by onControl, acted on by handleEvents
  int abortedBy_ = -1;
  std::atomic<bool> abortRequested_{false};
  std::atomic<bool> mismatch_{false};
  std::atomic<int64_t> abortedAtNs_{0};
  std::unique_ptr<std::atomic<bool>[]> lost_;  // per peer: Transport::peerLost

  static int64_t nowNs() { return std::chrono::steady_clock::now().time_since_epoch() / std::chrono::nanoseconds(1); }
};

}  // namespace ccl::transport::ucx
