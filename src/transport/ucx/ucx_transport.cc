// SPDX-License-Identifier: BSD-3-Clause
#include "transport/ucx/ucx_transport.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "transport/bootstrap/socket.h"
#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_request.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport {
namespace {

using ucx::UcxRequest;
using ucx::wireTag;
using ucx::Worker;

constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};

class UcxTransport final : public Transport {
 public:
  UcxTransport(int rank, int size) : worker_(rank, size) {}

  int rank() const override { return worker_.rank(); }
  int size() const override { return worker_.size(); }
  const char* name() const override { return "ucx"; }
  Worker& worker() { return worker_; }

  std::unique_ptr<Request> isend(int peer, uint64_t tag, const void* buf, size_t bytes) override;
  std::unique_ptr<Request> irecv(int peer, uint64_t tag, void* buf, size_t bytes) override;
  bool progress() override { return worker_.progress(); }
  bool sharedMemoryLink(int peer) const override { return worker_.sharedMemoryLink(peer); }
  void abort() override { worker_.requestAbort(); }
  void abortMismatch() override { worker_.requestAbort(true); }
  void peerLost(int peer) override { worker_.markLost(peer); }
  AbortState abortState() const override {
    return {worker_.aborted(), worker_.abortedForMismatch(), worker_.abortedBy()};
  }

 private:
  Worker worker_;
};

std::unique_ptr<Request> UcxTransport::isend(int peer, uint64_t tag, const void* buf, size_t bytes) {
  checkPost(*this, peer, tag, buf, bytes);
  auto request = std::make_unique<UcxRequest>(worker_, UcxRequest::Kind::kSend, peer);
  ucp_ep_h ep = worker_.endpoint(peer);
  if (worker_.aborted() || !ep) {
    request->fail(UCS_ERR_CANCELED);
    return request;
  }
  static const char empty = 0;
  ucp_request_param_t param{};
  request->start(ucp_tag_send_nbx(ep, buf ? buf : &empty, bytes, wireTag(rank(), tag), &param));
  return request;
}

std::unique_ptr<Request> UcxTransport::irecv(int peer, uint64_t tag, void* buf, size_t bytes) {
  checkPost(*this, peer, tag, buf, bytes);
  auto request = std::make_unique<UcxRequest>(worker_, UcxRequest::Kind::kRecv, peer);
  // A peer that failed or left may have sent this message before: it is posted all the same
  // (UCX matches one already arrived at once), and fails only if it stays pending (test()).
  if (worker_.aborted()) {
    request->fail(UCS_ERR_CANCELED);
    return request;
  }
  static char sink = 0;
  ucp_request_param_t param{};
  // UCX 1.13 does not fill recv_info when a receive completes immediately (an unexpected
  // message already arrived), so ask for a request always: ucp_tag_recv_request_test then
  // reports the length.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.recv_info.tag_info = request->recvInfo();
  request->start(ucp_tag_recv_nbx(worker_.handle(), buf ? buf : &sink, bytes, wireTag(peer, tag), kFullMask, &param));
  return request;
}

// Variable-length all-gather over the bootstrap: lengths first, then padded slots.
std::vector<std::vector<uint8_t>> gatherAddresses(bootstrap::Bootstrap& bs, const std::vector<uint8_t>& mine) {
  std::vector<uint64_t> lengths(bs.size());
  lengths[bs.rank()] = mine.size();
  bs.allGather(lengths.data(), sizeof(uint64_t));
  size_t slot = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> all(slot * bs.size());
  std::memcpy(all.data() + slot * bs.rank(), mine.data(), mine.size());
  bs.allGather(all.data(), slot);
  std::vector<std::vector<uint8_t>> out(bs.size());
  for (int r = 0; r < bs.size(); ++r) {
    CCL_CHECK(lengths[r] > 0 && lengths[r] <= slot, cclInternalError,
              "bad UCX address length from rank " + std::to_string(r));
    out[r].assign(all.data() + slot * r, all.data() + slot * r + lengths[r]);
  }
  return out;
}

// Exchanges one empty message with every rank so that connections are set up (and any
// unreachable peer reported) now rather than in the first collective. Tag 0 is safe:
// these messages are matched before createUcxTransport returns.
void wireUp(UcxTransport& t) {
  std::vector<std::unique_ptr<Request>> pending;
  for (int peer = 0; peer < t.size(); ++peer) {
    pending.push_back(t.irecv(peer, 0, nullptr, 0));
    pending.push_back(t.isend(peer, 0, nullptr, 0));
  }
  auto deadline = bootstrap::defaultDeadline();
  for (auto& r : pending) {
    while (!r->test()) {
      if (!t.progress()) {
        CCL_CHECK(bootstrap::Clock::now() < deadline, cclSystemError, "timeout connecting UCX endpoints");
        sched_yield();
      }
    }
  }
}

}  // namespace

const bool kUcxBuilt = true;

std::unique_ptr<Transport> createUcxTransport(bootstrap::Bootstrap& bs) {
  CCL_CHECK(bs.size() <= ucx::kMaxRanks, cclInvalidArgument,
            "the UCX transport supports at most " + std::to_string(ucx::kMaxRanks) + " ranks");
  auto transport = std::make_unique<UcxTransport>(bs.rank(), bs.size());
  std::vector<ucx::PeerInfo> peers(bs.size());
  peers[bs.rank()] = ucx::PeerInfo::local();
  bs.allGather(peers.data(), sizeof(ucx::PeerInfo));
  auto addresses = gatherAddresses(bs, transport->worker().address());
  transport->worker().connect(addresses, peers);
  wireUp(*transport);
  bs.barrier();
  CCL_INFO("UCX transport ready: rank %d of %d", bs.rank(), bs.size());
  return transport;
}

}  // namespace ccl::transport
