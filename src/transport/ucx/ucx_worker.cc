// SPDX-License-Identifier: BSD-3-Clause
#include "transport/ucx/ucx_worker.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/ucx/ucx_context.h"

namespace ccl::transport::ucx {

namespace {

constexpr uint32_t kAbortNotice = 0x54524241;     // "ABRT"
constexpr uint32_t kMismatchNotice = 0x4d53494d;  // "MISM"

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

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string readFile(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// False once `pid` has exited (a zombie counts as exited).
bool processAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::string stat = readFile(("/proc/" + std::to_string(pid) + "/stat").c_str());
  size_t paren = stat.rfind(')');
  if (stat.empty() || paren == std::string::npos || paren + 2 >= stat.size()) return true;
  char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

// Without peer-failure handling UCX may select its shared-memory transports, which cannot
// report a failed peer. That is worth it only when shared memory is actually available:
// over TCP, UCX's own detection costs nothing, and force-closing a TCP endpoint that has
// no error handling is undefined behaviour on the peer.
ucp_err_handling_mode_t errorMode(bool self, bool sameHost) {
  std::string mode = config::ucxErrMode();
  if (mode == "peer") return UCP_ERR_HANDLING_MODE_PEER;
  if (mode == "none") return UCP_ERR_HANDLING_MODE_NONE;
  CCL_CHECK(mode == "auto", cclInvalidArgument, "CCL_UCX_ERR_MODE='" + mode + "' must be auto, peer or none");
  return self || (sameHost && hasSharedMemory()) ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
}

}  // namespace

PeerInfo PeerInfo::local() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, readFile("/proc/sys/kernel/random/boot_id"));
  h = fnv1a(h, host);
  h = fnv1a(h, n > 0 ? std::string(ns, n) : std::string());
  return PeerInfo{h, static_cast<int64_t>(getpid()), hasSharedMemory() ? 1u : 0u};
}

Worker::Worker(int rank, int size)
    : rank_(rank),
      size_(size),
      eps_(size, nullptr),
      failed_(size, 0),
      epContexts_(size),
      exited_(size, 0),
      epFailed_(size, 0),
      // Read here, where an error may be thrown, not in a request's destructor.
      releaseLimit_(std::min<std::chrono::milliseconds>(std::chrono::seconds(30),
                                                        std::chrono::seconds(std::max<int64_t>(config::timeout(), 1)))),
      lost_(std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(size))) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time drives a communicator, but not always the same thread.
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  checkStatus(ucp_worker_create(processContext(), &params, &worker_), "ucp_worker_create");
}

Worker::~Worker() {
  if (aborted() && !abortApplied_) applyAbort();  // peers still learn of an abort nobody progressed
  cancelControlRecv();
  closeAll();
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

void Worker::connect(const std::vector<std::vector<uint8_t>>& addresses, const std::vector<PeerInfo>& peers) {
  const PeerInfo me = PeerInfo::local();
  watched_.assign(size_, 0);
  shm_.assign(size_, 0);
  for (int peer = 0; peer < size_; ++peer) {
    epContexts_[peer] = {this, peer};
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    params.err_mode = errorMode(peer == rank_, peers[peer].hostId == me.hostId);
    params.err_handler.cb = &Worker::onEndpointError;
    params.err_handler.arg = &epContexts_[peer];
    checkStatus(ucp_ep_create(worker_, &params, &eps_[peer]), "ucp_ep_create to rank " + std::to_string(peer));
    shm_[peer] = peer != rank_ && params.err_mode == UCP_ERR_HANDLING_MODE_NONE && peers[peer].hostId == me.hostId &&
                 me.sharedMemory && peers[peer].sharedMemory;
    if (params.err_mode == UCP_ERR_HANDLING_MODE_NONE && peers[peer].pid != me.pid) {
      watched_[peer] = static_cast<pid_t>(peers[peer].pid);
      anyWatched_ = true;
    }
  }
  postControlRecv();
}

void Worker::postControlRecv() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &Worker::onControl;
  param.user_data = this;
  // Any source: the mask ignores the rank bits.
  controlBuf_ = Notice{};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, &controlBuf_, sizeof(controlBuf_), kControlBit, kControlBit, &param);
  if (UCS_PTR_IS_ERR(r)) checkStatus(UCS_PTR_STATUS(r), "posting the abort-notice receive");
  controlRequest_ = r;
}

void Worker::onControl(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* arg) {
  auto* self = static_cast<Worker*>(arg);
  // `info` lives in the request: read it before the request is freed.
  const int from = status == UCS_OK ? tags::sourceOf(info->sender_tag) : -1;
  if (self->controlRequest_ == request) self->controlRequest_ = nullptr;
  ucp_request_free(request);
  const Notice n = self->controlBuf_;
  if (status != UCS_OK || (n.kind != kAbortNotice && n.kind != kMismatchNotice)) return;
  if (n.kind == kMismatchNotice) self->mismatch_.store(true, std::memory_order_relaxed);
  self->noticeFrom_ = n.by >= 0 && n.by < self->size_ ? n.by : from;
  self->failurePending_ = true;
}

void Worker::cancelControlRecv() {
  if (!controlRequest_) return;
  ucp_request_cancel(worker_, controlRequest_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (controlRequest_ && std::chrono::steady_clock::now() < deadline)
    if (ucp_worker_progress(worker_) == 0) sched_yield();
}

// A peer process on this host that exits fails like a peer reported by UCX. Checked about
// every 100 ms of progress, so the cost per progress call is a counter increment. Also after
// an abort (which fails every peer): a receive that UCX still holds is released once its
// peer's process is gone (deliversNoMore).
void Worker::watchPeers() {
  auto now = std::chrono::steady_clock::now();
  if (now < nextWatch_) return;
  nextWatch_ = now + std::chrono::milliseconds(100);
  for (int peer = 0; peer < size_; ++peer) {
    if (!watched_[peer] || exited_[peer] || processAlive(watched_[peer])) continue;
    exited_[peer] = 1;
    if (failed_[peer]) continue;
    CCL_WARN("UCX: rank %d lost rank %d: its process %d on this host has exited", rank_, peer, watched_[peer]);
    failed_[peer] = 1;
    failurePending_ = true;
  }
}

void Worker::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<EpContext*>(arg);
  Worker* self = ctx->self;
  if (!self->failed_[ctx->peer] && !self->aborted())
    CCL_WARN("UCX: rank %d lost rank %d: %s", self->rank_, ctx->peer, ucs_status_string(status));
  // UCX's own finding, not the end of an endpoint this rank closed (forceClose forgets it first).
  if (self->eps_[ctx->peer]) self->epFailed_[ctx->peer] = 1;
  self->failed_[ctx->peer] = 1;
  self->failurePending_ = true;
}

bool Worker::progress() {
  bool changed = ucp_worker_progress(worker_) != 0;
  if (anyWatched_ && (++progressCalls_ & 63) == 0) watchPeers();
  if (failurePending_ || (!abortApplied_ && aborted())) {
    handleEvents();
    changed = true;
  }
  return changed;
}

void Worker::handleEvents() {
  failurePending_ = false;
  if (noticeFrom_ >= 0 && !aborted()) {
    CCL_WARN("UCX: rank %d: rank %d aborted the communicator", rank_, noticeFrom_);
    abortedBy_ = noticeFrom_;
    requestAbort();
  }
  if (!abortApplied_ && aborted()) applyAbort();
  for (int peer = 0; peer < size_; ++peer)
    if (failed_[peer] && eps_[peer]) forceClose(peer);
}

// Tells every live peer, then fails everything: pending receives are cancelled by their
// test(), and closing the endpoints fails pending sends.
void Worker::applyAbort() {
  abortApplied_ = true;
  noticeSent_ = {abortedForMismatch() ? kMismatchNotice : kAbortNotice, abortedBy_ >= 0 ? abortedBy_ : rank_};
  const Notice& notice = noticeSent_;
  std::vector<ucs_status_ptr_t> sends;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peer == abortedBy_ || !eps_[peer] || failed_[peer]) continue;
    ucp_request_param_t param{};
    sends.push_back(ucp_tag_send_nbx(eps_[peer], &notice, sizeof(notice), kControlBit | wireTag(rank_, 0), &param));
  }
  auto deadline = std::chrono::milliseconds(200);
  for (ucs_status_ptr_t r : sends) waitAndFree(worker_, r, deadline);
  for (int peer = 0; peer < size_; ++peer) failed_[peer] = 1;
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

void Worker::closeAll() {
  // Flushing lets this rank's last sends reach live peers; the bound keeps a dead or
  // unresponsive peer from holding up the close (ucp_worker_destroy then releases what is
  // left of that endpoint).
  std::vector<std::pair<int, ucs_status_ptr_t>> closing;
  for (int peer = 0; peer < size_; ++peer) {
    if (!eps_[peer]) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = failed_[peer] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
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
