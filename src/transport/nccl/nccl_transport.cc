// SPDX-License-Identifier: BSD-3-Clause
#include "transport/nccl/nccl_transport.h"

#include <dlfcn.h>

#include <thread>

#include "common/error.h"
#include "common/face_note.h"
#include "transport/bootstrap/socket.h"

namespace ccl::transport::nccl {
namespace {

template <class F>
void resolve(void* handle, const std::string& path, const char* name, F& out) {
  void* p = dlsym(handle, name);
  if (!p) throw Error(cclSystemError, path + " has no " + name + ": not NVIDIA's NCCL");
  out = reinterpret_cast<F>(p);
}

}  // namespace

Functions load(const std::string& path) {
  // RTLD_LOCAL: the real library's names stay out of the global scope, where ccl's face may
  // export the same ones. The handle is kept for the life of the process (NCCL's own
  // threads may outlive any one communicator).
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw Error(cclSystemError, "cannot load the real NCCL (CCL_NCCL_LIBRARY=" + path + "): " + (why ? why : "?"));
  }
  Functions f;
  f.library = path;
  resolve(h, path, "pncclGetUniqueId", f.getUniqueId);
  if (insideCclFace(reinterpret_cast<const void*>(f.getUniqueId))) {
    dlclose(h);
    throw Error(cclInvalidUsage, "CCL_NCCL_LIBRARY=" + path + " is ccl's own NCCL face, not NVIDIA's NCCL");
  }
  resolve(h, path, "pncclCommInitRank", f.commInitRank);
  resolve(h, path, "pncclCommDestroy", f.commDestroy);
  resolve(h, path, "pncclCommAbort", f.commAbort);
  resolve(h, path, "pncclCommGetAsyncError", f.commGetAsyncError);
  resolve(h, path, "pncclGroupStart", f.groupStart);
  resolve(h, path, "pncclGroupEnd", f.groupEnd);
  resolve(h, path, "pncclSend", f.send);
  resolve(h, path, "pncclRecv", f.recv);
  resolve(h, path, "pncclGetErrorString", f.getErrorString);
  return f;
}

Transport::Transport(const Functions& fn, bootstrap::Bootstrap& bs) : fn_(fn), rank_(bs.rank()), size_(bs.size()) {
  CCL_CHECK(fn_.getUniqueId && fn_.commInitRank && fn_.commDestroy && fn_.commAbort && fn_.commGetAsyncError &&
                fn_.groupStart && fn_.groupEnd && fn_.send && fn_.recv,
            cclInvalidArgument, "the NCCL transport needs every function of its table");
  // Rank 0's failure to make an id must not leave the others waiting in the broadcast: the
  // id goes out with a status word.
  struct {
    UniqueId id;
    int status;
  } msg{};
  if (rank_ == 0) {
    msg.status = fn_.getUniqueId(&msg.id);
  }
  bs.broadcast(&msg, sizeof(msg), 0);
  check(msg.status, "ncclGetUniqueId on rank 0");
  check(fn_.commInitRank(&comm_, size_, msg.id, rank_), "ncclCommInitRank");
}

Transport::Transport(const Functions& fn, Comm existing, int rank, int size)
    : fn_(fn), comm_(existing), owned_(false), rank_(rank), size_(size) {
  CCL_CHECK(existing && fn_.groupStart && fn_.groupEnd && fn_.send && fn_.recv && fn_.commGetAsyncError,
            cclInvalidArgument, "the NCCL transport needs a communicator and its group, send and receive functions");
}

Transport::~Transport() {
  if (comm_ && owned_ && !aborted_.load()) fn_.commDestroy(comm_);
}

void Transport::check(int result, const char* what) const {
  if (result == kSuccess || result == kInProgress) return;
  const char* text = fn_.getErrorString ? fn_.getErrorString(result) : nullptr;
  throw Error(cclSystemError, std::string("the real NCCL's ") + what + " failed: " + (text ? text : "error ") +
                                  (text ? "" : std::to_string(result)) + " (" + fn_.library + ")");
}

void Transport::group(std::span<const Op> ops, Stream stream) {
  CCL_CHECK(!aborted_, cclInvalidUsage, "the NCCL transport was aborted");
  for (const Op& op : ops)
    CCL_CHECK(op.peer >= 0 && op.peer < size_ && (op.buf || op.bytes == 0), cclInvalidArgument,
              "NCCL transport: a transfer with peer " + std::to_string(op.peer) + " of " + std::to_string(size_) +
                  " or no buffer");
  check(fn_.groupStart(), "ncclGroupStart");
  int failed = kSuccess;
  const char* what = nullptr;
  for (const Op& op : ops) {
    const int r = op.send ? fn_.send(op.buf, op.bytes, kUint8, op.peer, comm_, stream)
                          : fn_.recv(op.buf, op.bytes, kUint8, op.peer, comm_, stream);
    if (r != kSuccess && failed == kSuccess) {
      failed = r;
      what = op.send ? "ncclSend" : "ncclRecv";
    }
  }
  // The group is always closed, even after a failed post: NCCL's group state is per thread.
  const int end = fn_.groupEnd();
  check(failed, what ? what : "ncclSend");
  check(end, "ncclGroupEnd");
  if (end == kInProgress) awaitEnqueued();
}

void Transport::awaitEnqueued() const {
  // A non-blocking communicator returns ncclInProgress before its transfers are on the
  // stream; what the caller records on the stream next (the wave's end) would come before
  // them. So wait, as NCCL asks of its callers, until the communicator leaves that state; as
  // every blocking wait, for CCL_TIMEOUT at most (a peer that never posts its side).
  const bootstrap::Deadline deadline = bootstrap::defaultDeadline();
  for (;;) {
    CCL_CHECK(!aborted_, cclInvalidUsage, "the NCCL transport was aborted");
    CCL_CHECK(bootstrap::Clock::now() < deadline, cclSystemError,
              "the NCCL communicator's group stayed in progress for CCL_TIMEOUT: a peer did not post its side");
    int state = kSuccess;
    check(fn_.commGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
    if (state == kSuccess) return;
    if (state != kInProgress) check(state, "group (asynchronous)");
    std::this_thread::yield();
  }
}

int Transport::asyncError(std::string* message) const {
  int result = kSuccess;
  const int r = fn_.commGetAsyncError(comm_, &result);
  if (r != kSuccess) result = r;
  if (message && result != kSuccess && result != kInProgress) {
    const char* text = fn_.getErrorString ? fn_.getErrorString(result) : nullptr;
    *message = std::string("the real NCCL communicator failed: ") + (text ? text : std::to_string(result));
  }
  return result == kInProgress ? kSuccess : result;
}

void Transport::abort() {
  // ncclCommAbort may be called from any thread while kernels wait; destroy then skips it.
  if (!comm_ || aborted_.exchange(true)) return;
  if (fn_.commAbort) fn_.commAbort(comm_);
}

}  // namespace ccl::transport::nccl
