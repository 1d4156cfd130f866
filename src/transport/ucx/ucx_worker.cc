#include "transport/ucx/ucx_worker.h"

#include <sched.h>

#include <chrono>

#include "common/error.h"
#include "common/log.h"
#include "transport/ucx/ucx_context.h"

namespace ccl::transport::ucx {

namespace {

// Progresses `worker` until `request` (a status pointer returned by UCX) is no longer in
// progress or `limit` passes; then releases it. Returns its final status.
ucs_status_t waitAndFree(ucp_worker_h worker, ucs_status_ptr_t request, std::chrono::milliseconds limit) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  auto deadline = std::chrono::steady_clock::now() + limit;
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(worker) == 0) {
      if (std::chrono::steady_clock::now() > deadline) break;
      sched_yield();
    }
  }
  ucp_request_free(request);  // a request still in progress is released when it completes
  return status;
}

}  // namespace

Worker::Worker(int rank, int size)
    : rank_(rank), size_(size), eps_(size, nullptr), failed_(size, 0), epContexts_(size) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time drives a communicator, but not always the same thread.
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  checkStatus(ucp_worker_create(processContext(), &params, &worker_), "ucp_worker_create");
}

Worker::~Worker() {
  closeAll(false);
  ucp_worker_destroy(worker_);
}

std::vector<uint8_t> Worker::address() const {
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  checkStatus(ucp_worker_get_address(worker_, &addr, &len), "ucp_worker_get_address");
  std::vector<uint8_t> out(reinterpret_cast<uint8_t*>(addr), reinterpret_cast<uint8_t*>(addr) + len);
  ucp_worker_release_address(worker_, addr);
  return out;
}

void Worker::connect(const std::vector<std::vector<uint8_t>>& addresses) {
  for (int peer = 0; peer < size_; ++peer) {
    epContexts_[peer] = {this, peer};
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Worker::onEndpointError;
    params.err_handler.arg = &epContexts_[peer];
    checkStatus(ucp_ep_create(worker_, &params, &eps_[peer]), "ucp_ep_create to rank " + std::to_string(peer));
  }
}

void Worker::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<EpContext*>(arg);
  Worker* self = ctx->self;
  if (!self->failed_[ctx->peer] && !self->aborted())
    CCL_WARN("UCX: rank %d lost rank %d: %s", self->rank_, ctx->peer, ucs_status_string(status));
  self->failed_[ctx->peer] = 1;
  self->failurePending_ = true;
}

bool Worker::progress() {
  bool changed = ucp_worker_progress(worker_) != 0;
  if (failurePending_ || (!abortApplied_ && aborted())) {
    handleEvents();
    changed = true;
  }
  return changed;
}

void Worker::handleEvents() {
  failurePending_ = false;
  if (!abortApplied_ && aborted()) {
    abortApplied_ = true;
    for (int peer = 0; peer < size_; ++peer) failed_[peer] = 1;
  }
  for (int peer = 0; peer < size_; ++peer)
    if (failed_[peer] && eps_[peer]) forceClose(peer);
}

void Worker::forceClose(int peer) {
  ucp_ep_h ep = eps_[peer];
  if (!ep) return;
  eps_[peer] = nullptr;
  failed_[peer] = 1;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  waitAndFree(worker_, ucp_ep_close_nbx(ep, &param), std::chrono::seconds(5));
}

void Worker::closeAll(bool force) {
  // Flushing lets this rank's last sends reach live peers; the bound keeps a dead or
  // unresponsive peer from holding up the close, after which the endpoint is forced.
  std::vector<std::pair<int, ucs_status_ptr_t>> closing;
  for (int peer = 0; peer < size_; ++peer) {
    if (!eps_[peer]) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    closing.emplace_back(peer, ucp_ep_close_nbx(eps_[peer], &param));
    eps_[peer] = nullptr;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto& [peer, request] : closing) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    ucs_status_t status = waitAndFree(worker_, request, std::max(left, std::chrono::milliseconds(0)));
    if (status == UCS_INPROGRESS)
      CCL_WARN("UCX: rank %d: closing the endpoint to rank %d timed out", rank_, peer);
    else if (status != UCS_OK && !failed_[peer])
      CCL_INFO("UCX: rank %d: closing the endpoint to rank %d: %s", rank_, peer, ucs_status_string(status));
  }
}

}  // namespace ccl::transport::ucx
