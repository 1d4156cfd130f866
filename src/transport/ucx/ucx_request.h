// SPDX-License-Identifier: BSD-3-Clause
// A posted UCP tag send or receive. Requests are small and recycled through a per-thread
// free list, so posting a message allocates nothing in the steady state.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>

#include "transport/transport.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport::ucx {

class UcxRequest final : public Request {
 public:
  enum class Kind { kSend, kRecv };

  UcxRequest(Worker& worker, Kind kind, int peer) : worker_(worker), kind_(kind), peer_(peer) {}
  ~UcxRequest() override;

  // Takes the result of ucp_tag_send_nbx / ucp_tag_recv_nbx.
  void start(ucs_status_ptr_t result);
  // Marks the request failed before anything was posted.
  void fail(ucs_status_t status) { status_ = status; }
  // Where UCX writes a receive's length and tag.
  ucp_tag_recv_info_t* recvInfo() { return &info_; }

  bool test() override;
  size_t receivedBytes() const override { return kind_ == Kind::kRecv ? info_.length : 0; }

  static void* operator new(size_t bytes);
  static void operator delete(void* p) noexcept;

 private:
  ucs_status_t poll();
  void cancelAndRelease();
  [[noreturn]] void throwFailure() const;

  Worker& worker_;
  Kind kind_;
  int peer_;
  void* ucpRequest_ = nullptr;            // non-null while UCX owns the operation
  ucs_status_t status_ = UCS_INPROGRESS;  // final status once ucpRequest_ is released
  ucp_tag_recv_info_t info_{};
};

}  // namespace ccl::transport::ucx
