// SPDX-License-Identifier: BSD-3-Clause
#include "transport/ucx/ucx_request.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "transport/ucx/ucx_context.h"

namespace ccl::transport::ucx {

namespace {

// Recycled request storage of this thread. A request freed on another thread simply joins
// that thread's list.
struct FreeList {
  static constexpr size_t kMax = 256;
  void* items[kMax];
  size_t count = 0;
  ~FreeList() {
    while (count > 0) ::operator delete(items[--count]);
  }
};
thread_local FreeList freeList;

}  // namespace

void* UcxRequest::operator new(size_t bytes) {
  if (bytes == sizeof(UcxRequest) && freeList.count > 0) return freeList.items[--freeList.count];
  return ::operator new(sizeof(UcxRequest) > bytes ? sizeof(UcxRequest) : bytes);
}

void UcxRequest::operator delete(void* p) noexcept {
  if (freeList.count < FreeList::kMax) {
    freeList.items[freeList.count++] = p;
  } else {
    ::operator delete(p);
  }
}

void UcxRequest::start(ucs_status_ptr_t result) {
  if (result == nullptr) {
    status_ = UCS_OK;
  } else if (UCS_PTR_IS_ERR(result)) {
    status_ = UCS_PTR_STATUS(result);
  } else {
    ucpRequest_ = result;
  }
}

ucs_status_t UcxRequest::poll() {
  ucs_status_t s =
      kind_ == Kind::kRecv ? ucp_tag_recv_request_test(ucpRequest_, &info_) : ucp_request_check_status(ucpRequest_);
  if (s != UCS_INPROGRESS) {
    ucp_request_free(ucpRequest_);
    ucpRequest_ = nullptr;
    status_ = s;
  }
  return s;
}

bool UcxRequest::test() {
  if (ucpRequest_) {
    if (poll() == UCS_INPROGRESS) {
      // UCX completes sends to a failed peer by itself, but a tag receive is not bound to
      // an endpoint: it would wait forever for a peer that is gone or for an aborted
      // communicator.
      if (!worker_.aborted() && !worker_.peerFailed(peer_)) return false;
      cancelAndRelease();
      if (status_ == UCS_OK) return true;
    }
  }
  if (status_ == UCS_OK) return true;
  throwFailure();
}

void UcxRequest::throwFailure() const {
  const char* op = kind_ == Kind::kSend ? "send to" : "receive from";
  if (worker_.aborted() && worker_.abortedForMismatch())
    throw Error(cclInvalidUsage, std::string("UCX ") + op + " rank " + std::to_string(peer_) + " stopped: rank " +
                                     std::to_string(worker_.abortedBy() >= 0 ? worker_.abortedBy() : worker_.rank()) +
                                     " found the ranks out of step (mismatched calls) and aborted the communicator");
  if (worker_.aborted() && worker_.abortedBy() >= 0)
    throw Error(cclRemoteError, std::string("UCX ") + op + " rank " + std::to_string(peer_) + " failed: rank " +
                                    std::to_string(worker_.abortedBy()) + " aborted the communicator");
  if (worker_.aborted())
    throw Error(cclRemoteError,
                std::string("UCX ") + op + " rank " + std::to_string(peer_) + " failed: the communicator was aborted");
  if (status_ == UCS_ERR_CANCELED && worker_.peerFailed(peer_))
    throw Error(cclRemoteError,
                std::string("UCX ") + op + " rank " + std::to_string(peer_) + " failed: the peer is unreachable");
  throw Error(resultOf(status_),
              std::string("UCX ") + op + " rank " + std::to_string(peer_) + " failed: " + ucs_status_string(status_));
}

// Cancels the operation and progresses until UCX releases it. UCX 1.13 cannot cancel a
// send: if one does not finish soon its endpoint is force-closed, which fails it on TCP
// endpoints. A rendezvous send over shared memory survives even that; it is abandoned
// after a short grace (UCX only ever reads a send buffer), so abort stays prompt.
// The grace counts from the abort (all pending requests share it), and there is none for a
// send to a rank known lost: nobody will ever take it.
// Nor can it cancel a receive that has matched the first fragments of a message sent eagerly
// (below the rendezvous threshold: up to 4 MiB over TCP, processContext): UCX writes each
// later fragment into its buffer as it comes, inside this worker's progress. Once the sender
// can deliver nothing more (Worker::deliversNoMore: it died, or UCX failed its endpoint) and
// a progress call found nothing more of it, nothing will write the buffer again: released at
// once. Otherwise (a live sender stopped in the middle) UCX might, so the wait is bounded by
// CCL_TIMEOUT, at most 30 s, counted from the abort.
void UcxRequest::cancelAndRelease() {
  ucp_request_cancel(worker_.handle(), ucpRequest_);
  using Clock = std::chrono::steady_clock;
  const auto start = worker_.aborted() ? std::min(Clock::now(), worker_.abortedAt()) : Clock::now();
  const auto grace =
      kind_ == Kind::kSend && worker_.lost(peer_) ? std::chrono::milliseconds(0) : std::chrono::milliseconds(200);
  const auto limit = kind_ == Kind::kSend ? 2 * grace : worker_.releaseLimit();
  bool forced = false;
  auto release = [&] {
    ucp_request_free(ucpRequest_);  // UCX releases it if it ever completes
    ucpRequest_ = nullptr;
    status_ = UCS_ERR_CANCELED;
  };
  while (poll() == UCS_INPROGRESS) {
    if (worker_.progress()) continue;
    if (kind_ == Kind::kRecv && worker_.deliversNoMore(peer_)) {
      CCL_INFO("UCX: rank %d: released a receive from rank %d, which can send no more of its message", worker_.rank(),
               peer_);
      release();
      return;
    }
    auto waited = Clock::now() - start;
    if (!forced && kind_ == Kind::kSend && waited > grace) {
      CCL_INFO("UCX: rank %d: force-closing the endpoint to rank %d to release a pending send", worker_.rank(), peer_);
      worker_.forceClose(peer_);
      forced = true;
    } else if (waited > limit) {
      if (kind_ == Kind::kSend)
        CCL_INFO("UCX: rank %d: abandoning a send to rank %d that cannot complete", worker_.rank(), peer_);
      else
        CCL_WARN("UCX: rank %d: a receive from rank %d could not be released; its buffer may still be written",
                 worker_.rank(), peer_);
      release();
      return;
    }
    sched_yield();
  }
}

UcxRequest::~UcxRequest() {
  if (ucpRequest_) cancelAndRelease();
}

}  // namespace ccl::transport::ucx
