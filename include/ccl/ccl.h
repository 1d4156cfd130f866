/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ccl: collective communication with built-in compression.
 *
 * The C ABI mirrors NCCL 2.28: the same argument order, the same enum values and a
 * 128-byte unique id, with the `ccl` prefix. A `cudaStream_t` passes unchanged as a
 * `cclStream_t`; calls on host memory pass NULL and have completed when they return, or a
 * host stream (cclHostStreamCreate) and run asynchronously, in order, on that stream.
 *
 * Device memory (a build with CUDA): a call whose buffers are memory of the communicator's
 * device (cclCommCuDevice) is enqueued on the CUDA stream it is given and returns, as in
 * NCCL; its result is in place once the stream has run it, and a failure found after the
 * call returned is reported by cclCommGetAsyncError. Device calls need a CUDA stream (not
 * NULL, not a host stream; cudaStreamLegacy names the legacy default stream) and all of a
 * call's (and a group's) buffers in one memory;
 * a group's device calls are enqueued together at cclGroupEnd (a send to the calling rank
 * itself must be in a group with its receive). Every codec but powersgd
 * compresses them, with residual error feedback (LoCo's state is kept on the host only).
 * Their bytes are staged through pinned host memory and the communicator's transport, or
 * with CCL_DEVICE_TRANSPORT=nccl (set on every rank) go over a real NCCL communicator made
 * at init. The host sees no lengths of streams a device encodes, so on device buffers
 * quantizers with fp32 or e8m0 scales write fixed-length streams, in which a block holding a
 * NaN or an infinity arrives as NaN in every element (elsewhere it arrives exactly). NCCL
 * moves every encoded stream at its bound: there a call whose bound is still not smaller
 * than its data (fp16 scales, a high keep ratio) is carried uncompressed.
 *
 * Every function returns a cclResult_t. On failure cclGetLastError() describes the
 * argument or condition at fault. Output parameters are written only on success.
 * No function aborts the process or throws across this interface.
 */
#ifndef CCL_CCL_H_
#define CCL_CCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CCL_BUILDING_LIBRARY)
#define CCL_API __attribute__((visibility("default")))
#else
#define CCL_API
#endif

/* In C++ the enums get a fixed underlying int, so that any int a C caller passes is a value
 * of the type (and can be refused), never undefined behaviour. The layout is the same. */
#ifdef __cplusplus
#define CCL_ENUM_TYPE : int
#else
#define CCL_ENUM_TYPE
#endif

#define CCL_MAJOR 0
#define CCL_MINOR 3
#define CCL_PATCH 0
/* Encoded as NCCL encodes versions from 2.9 on: MAJOR*10000 + MINOR*100 + PATCH. */
#define CCL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define CCL_VERSION_CODE CCL_VERSION(CCL_MAJOR, CCL_MINOR, CCL_PATCH)

/* Opaque communicator handle. */
typedef struct cclComm* cclComm_t;
#define CCL_COMM_NULL NULL

/* Layout-compatible with cudaStream_t; for host-memory calls NULL or a host stream. */
typedef struct CUstream_st* cclStream_t;

#define CCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CCL_UNIQUE_ID_BYTES];
} cclUniqueId;

/* Same values as ncclResult_t. */
typedef enum CCL_ENUM_TYPE {
  cclSuccess = 0,
  cclUnhandledCudaError = 1,
  cclSystemError = 2,
  cclInternalError = 3,
  cclInvalidArgument = 4,
  cclInvalidUsage = 5,
  cclRemoteError = 6,
  cclInProgress = 7,
  cclNumResults = 8
} cclResult_t;

/*
 * Same values as ncclRedOp_t. Values >= cclNumOps are reserved for user-defined ops.
 * cclMax and cclMin of floating types propagate NaN, as torch.max does: an element that is
 * NaN on any rank is NaN on every rank (fp32's quiet NaN, rounded to the type), whichever
 * rank held it and whatever the algorithm. Of zeros of both signs cclMax gives +0 and cclMin
 * -0, so every rank gets the same bits. Integer types compare as usual.
 */
typedef enum CCL_ENUM_TYPE {
  cclSum = 0,
  cclProd = 1,
  cclMax = 2,
  cclMin = 3,
  cclAvg = 4,
  cclNumOps = 5,
  cclMaxRedOp = 0x7fffffff
} cclRedOp_t;

/* Same values as ncclDataType_t. */
typedef enum CCL_ENUM_TYPE {
  cclInt8 = 0,
  cclChar = 0,
  cclUint8 = 1,
  cclInt32 = 2,
  cclInt = 2,
  cclUint32 = 3,
  cclInt64 = 4,
  cclUint64 = 5,
  cclFloat16 = 6,
  cclHalf = 6,
  cclFloat32 = 7,
  cclFloat = 7,
  cclFloat64 = 8,
  cclDouble = 8,
  cclBfloat16 = 9,
  cclFloat8e4m3 = 10,
  cclFloat8e5m2 = 11,
  cclNumTypes = 12
} cclDataType_t;

#define CCL_CONFIG_UNDEF_INT INT_MIN
#define CCL_CONFIG_UNDEF_PTR NULL
#define CCL_SPLIT_NOCOLOR -1
#define CCL_CONFIG_MAGIC 0xcc1c0f19u

/*
 * Communicator configuration. Always start from CCL_CONFIG_INITIALIZER. The library reads
 * only `size` bytes, so a caller built against an older, shorter layout keeps working;
 * fields it did not pass take their defaults. Fields left at CCL_CONFIG_UNDEF_* take the
 * value of the matching CCL_* environment variable, or the built-in default. New fields are
 * only ever added at the end.
 *
 * hostId: this rank's host identity. Ranks whose identities are equal form one node of the
 * communicator (cclCommTopology); hierarchical algorithms keep their intra-node steps inside
 * it. NULL: CCL_HOST_ID, else a hash of the host name and boot id (as NCCL's host hash). The
 * text is hashed, not kept; it must be 1 to 255 characters without control characters, else
 * init fails with cclInvalidArgument. Giving ranks of one machine different identities makes
 * them separate nodes (tests, one network namespace per node); giving ranks of different
 * machines one identity makes a single node of them, which only changes how algorithms are
 * laid out. In cclCommSplit's config it must be NULL or name the parent's identity: a child
 * keeps each rank's identity, so its topology is the parent's restricted to its ranks.
 *
 * intraCompression: the codec of the steps inside a node of hierarchical algorithms (steps
 * that cross nodes use `compression`), for the calls that are compressed: a call the policy
 * leaves uncompressed (CCL_COMPRESS, CCL_CODEC_MIN_BYTES, a codec of none) is exact inside
 * the nodes too. Copied at init. NULL: CCL_CODEC_INTRA with the
 * CCL_CODEC_* parameters, default none (intra-node steps uncompressed). Invalid parameters
 * fail init with cclInvalidArgument.
 */
typedef struct cclConfig_v1 {
  size_t size;          /* sizeof(cclConfig_t) as the caller saw it */
  unsigned int magic;   /* CCL_CONFIG_MAGIC */
  unsigned int version; /* CCL_VERSION_CODE the caller was built with */
  int blocking;         /* 1 (default): calls block until done. 0: init may return cclInProgress */
  const char* commName; /* optional name used in log lines; copied */
  int timeoutMs;        /* deadline of every blocking wait; default CCL_TIMEOUT */
  /* default codec of the communicator (copied); NULL: from CCL_CODEC and CCL_CODEC_* */
  const struct cclCompression_v1* compression;
  const char* hostId; /* host identity (above); NULL: CCL_HOST_ID, else the host's hash */
  /* codec of steps inside a node (above, copied); NULL: from CCL_CODEC_INTRA and CCL_CODEC_* */
  const struct cclCompression_v1* intraCompression;
} cclConfig_t;

#define CCL_CONFIG_INITIALIZER                                                                           \
  {                                                                                                      \
    sizeof(cclConfig_t), CCL_CONFIG_MAGIC, CCL_VERSION_CODE, CCL_CONFIG_UNDEF_INT, CCL_CONFIG_UNDEF_PTR, \
        CCL_CONFIG_UNDEF_INT, CCL_CONFIG_UNDEF_PTR, CCL_CONFIG_UNDEF_PTR, CCL_CONFIG_UNDEF_PTR           \
  }

/* ---- Version and errors ---- */

/* Writes CCL_VERSION_CODE of the loaded library to *version. */
CCL_API cclResult_t cclGetVersion(int* version);

/* A static, human-readable name for `result`; never NULL. */
CCL_API const char* cclGetErrorString(cclResult_t result);

/*
 * The message recorded by the last failing ccl call of this thread, naming the function
 * and the argument or condition at fault. Never NULL; empty when nothing failed yet. With a
 * communicator (NULL is accepted, as in NCCL): that communicator's asynchronous failure
 * when it is newer than this thread's last one, the failure cclCommGetAsyncError reports
 * and no call of this thread saw (a call on a device stream that failed after it returned,
 * a rank the communicator lost: "rank 3 is gone (...)"). The handle is only compared, never
 * read: a communicator another thread is destroying or aborting gives this thread's message.
 * Valid until the next call of this function or failing call on this thread.
 */
CCL_API const char* cclGetLastError(cclComm_t comm);

/* ---- Communicator lifecycle ---- */

/*
 * Creates a unique id for a new communicator. The calling process starts a rendezvous
 * service that lives until every rank has joined (or CCL_TIMEOUT passes). Distribute the
 * id to all ranks (shared memory, MPI_Bcast, a file) before they call cclCommInitRank.
 */
CCL_API cclResult_t cclGetUniqueId(cclUniqueId* uniqueId);

/*
 * Joins communicator `commId` as `rank` of `nranks`. Blocks until every rank has joined.
 * Every rank must pass the same id and nranks; 0 <= rank < nranks. *comm is NULL on failure
 * (as *comms of cclCommInitAll and *newcomm of cclCommSplit and cclCommShrink are).
 */
CCL_API cclResult_t cclCommInitRank(cclComm_t* comm, int nranks, cclUniqueId commId, int rank);

/* As cclCommInitRank, with a configuration (NULL means defaults). */
CCL_API cclResult_t cclCommInitRankConfig(cclComm_t* comm, int nranks, cclUniqueId commId, int rank,
                                          cclConfig_t* config);

/*
 * Creates one communicator per rank of a new `ndev`-rank communicator inside this process.
 * Where ccl has a device, rank r's device is devlist[r] (devlist NULL: device r), as NCCL
 * places them; host memory needs no devlist.
 */
CCL_API cclResult_t cclCommInitAll(cclComm_t* comms, int ndev, const int* devlist);

/*
 * Collective over `comm`: ranks passing the same `color` form a new communicator, ordered
 * by `key` then by their rank in `comm`. A rank passing CCL_SPLIT_NOCOLOR gets
 * *newcomm = NULL. `config` NULL inherits the parent's configuration. Every rank keeps its
 * host identity, so the new communicator's nodes are the parent's restricted to its ranks.
 */
CCL_API cclResult_t cclCommSplit(cclComm_t comm, int color, int key, cclComm_t* newcomm, cclConfig_t* config);

/* Completes outstanding work of `comm`; afterwards only cclCommDestroy is valid. */
CCL_API cclResult_t cclCommFinalize(cclComm_t comm);

/* Frees `comm` and its resources. Not collective; pending work is abandoned. */
CCL_API cclResult_t cclCommDestroy(cclComm_t comm);

/*
 * Stops every operation of `comm`, from any thread, and frees it. Operations blocked in
 * other threads return cclInvalidUsage or cclRemoteError promptly; peers see cclRemoteError.
 * Operations of `comm` that another thread queued in its open group stay queued: that
 * group's cclGroupEnd runs none of its operations and returns cclInvalidUsage, and the
 * communicator's memory is freed then. The same holds for cclCommDestroy from another thread.
 */
CCL_API cclResult_t cclCommAbort(cclComm_t comm);

/*
 * Revokes `comm`, from any thread, without freeing it (NCCL's ncclCommRevoke): every
 * operation of `comm` running or queued on this rank fails promptly, and so do the peers'
 * (cclRemoteError, naming this rank), whatever call each of them is in, so that ranks stuck
 * in different calls all come out. Later calls on `comm` fail with cclInvalidUsage on this
 * rank and with cclRemoteError on its peers. Returns once no call of `comm` runs on this
 * rank. What remains valid: cclCommDestroy, cclCommAbort, cclCommShrink, and, once every
 * rank has revoked it, cclCommSplit (every rank takes part, as in any split; a rank that
 * leaves passes CCL_SPLIT_NOCOLOR). `flags` must be 0. Revoking twice is a no-op.
 */
CCL_API cclResult_t cclCommRevoke(cclComm_t comm, int flags);

/* cclCommShrink's flags; the first two have NCCL's values. */
#define CCL_SHRINK_DEFAULT 0x00 /* the parent's calls on this rank are over */
#define CCL_SHRINK_ABORT 0x01   /* revoke the parent first (cclCommRevoke): its running calls fail */
#define CCL_SHRINK_ALIVE 0x100  /* no list: the ranks that go on are those whose process is alive */

/*
 * The ranks of `comm` outside excludeRanks (excludeCount distinct ranks of `comm`) form a new
 * communicator, numbered in their order in `comm` (NCCL's ncclCommShrink). Only they call
 * it, each with the same list; the excluded ranks may be gone. No message travels over
 * `comm`, which a lost rank may have broken: the ranks meet at the rendezvous listener the
 * lowest of them kept from `comm`'s init. `comm` may have failed or been revoked; it stays
 * valid for cclCommDestroy and further shrinks (made in the same order on every rank).
 * With CCL_SHRINK_ALIVE (excludeRanks NULL, excludeCount 0) each rank drops the ranks whose
 * process refuses a connection (or whose host is silent for a second); the ranks must find
 * the same ones.
 * Carried over: the configuration (config NULL: the parent's), every rank's host identity
 * (so the nodes, restricted to the ranks that remain), and the implicit error-feedback
 * state of calls made without a handle, which moves (the parent keeps none). Feedback
 * handles are the caller's and carry over as they are.
 * Ranks that disagree on the list form no communicator: those that meet at the same rank all
 * fail with cclInvalidUsage; the lowest rank of each list also tells the ranks it leaves
 * out, so a group forming with another list fails too (both, when the first has not formed
 * yet). A listed rank that never calls makes the others fail after CCL_TIMEOUT
 * (cclSystemError), naming it. *newcomm is NULL on failure.
 * A failed shrink may be retried: every rank that goes on calls cclCommShrink again on
 * `comm` (with the list it holds now), including those that came to the failed one late. The
 * retry supersedes the failed one at its root: ranks still waiting in the failed one fail
 * with cclRemoteError, as does a rank that comes to it after its root began the retry, and
 * neither fails the retry.
 */
CCL_API cclResult_t cclCommShrink(cclComm_t comm, const int* excludeRanks, int excludeCount, cclComm_t* newcomm,
                                  cclConfig_t* config, int flags);

/*
 * The asynchronous error state of `comm`: cclSuccess, cclInProgress or the failure seen.
 * A lost rank turns it to cclRemoteError even while no call runs: a thread of the library
 * waits on every communicator's bootstrap connections, and a process that dies (or aborts the
 * communicator) is found by its ring neighbours as soon as its connections close, and by the
 * other ranks as the news goes round; the next call then names the rank that was lost. A
 * rank whose host goes silent is found by the next call's CCL_TIMEOUT. A communicator that is
 * destroyed, or whose process exits normally, is not taken for a lost rank.
 * A rank's own failure inside a call (a step that fails, memory it cannot get, a stream its
 * decode refuses), on host or device buffers, aborts the communicator on that rank: its
 * error is its own, and the peers' calls (the one running, or their next) fail at once with
 * cclRemoteError naming it, rather than wait for its messages until CCL_TIMEOUT. (Device calls
 * whose bytes move over NVIDIA's NCCL, the NCCL face's, leave the peers to NCCL.) Nothing the
 * failed call left in its buffers reaches a peer as data: each compressed stream it would
 * have sent after the failure says so (the peer's decode fails with cclRemoteError), and no
 * uncompressed byte goes, except over NVIDIA's NCCL, whose sends are posted ahead.
 */
CCL_API cclResult_t cclCommGetAsyncError(cclComm_t comm, cclResult_t* asyncError);

/* Number of ranks of `comm`. */
CCL_API cclResult_t cclCommCount(const cclComm_t comm, int* count);

/* CUDA device of `comm`: the device current when it was made (cclCommSplit: the parent's;
 * cclCommInitAll: devlist[rank]); -1 where ccl has no device (a build without CUDA, a
 * machine without a GPU). */
CCL_API cclResult_t cclCommCuDevice(const cclComm_t comm, int* device);

/* This process's rank in `comm`. */
CCL_API cclResult_t cclCommUserRank(const cclComm_t comm, int* rank);

/*
 * Where this rank of `comm` sits among its nodes (ranks with equal host identities, see
 * cclConfig_t.hostId): *node is its node, numbered 0..*nnodes-1 in the order of each node's
 * lowest rank; *localRank is its index among its node's ranks (in rank order), of
 * *localRanks. Nodes may differ in size. The topology is fixed at init (and kept through
 * cclCommSplit), equal on every rank, and readable after cclCommFinalize. Any output pointer
 * may be NULL: that value is not returned. cclInvalidArgument if `comm` is NULL or invalid.
 */
CCL_API cclResult_t cclCommTopology(const cclComm_t comm, int* node, int* nnodes, int* localRank, int* localRanks);

/* ---- Collectives ----
 * Buffers hold `count` elements of `datatype` unless stated otherwise. sendbuff may equal
 * the matching part of recvbuff (in place); buffers that overlap in any other way are
 * refused with cclInvalidArgument. Count 0 is legal and moves nothing. Reductions
 * of 16-bit and fp8 types are computed in fp32 and rounded once per step. cclAvg is a sum
 * divided at the end, except uncompressed averages of fp16 and the fp8 types, whose range a
 * sum leaves: those scale each rank's input by 1/nranks first (divided in fp32, rounded to
 * the type), then sum, as NCCL does, so the average of values near the type's largest stays
 * finite; their rounding error is then bounded by the inputs' magnitude over nranks, not the
 * result's. Compressed averages sum in fp32 and divide once. With stream NULL
 * the call has completed when it returns; inside cclGroupStart/End it runs at cclGroupEnd.
 * Buffers may start at any address, as NCCL's may, also inside an element (a float at an odd
 * address): calls that reduce or compress such a buffer copy it to aligned memory first and
 * the result back (one extra copy of each, on host and device memory alike), and give the
 * same bytes as aligned buffers; calls that only move bytes use it in place.
 */

/* recvbuff[i] = op over ranks of sendbuff[i]; every rank gets the result. */
CCL_API cclResult_t cclAllReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                 cclRedOp_t op, cclComm_t comm, cclStream_t stream);

/* recvbuff of every rank = sendbuff of `root` (sendbuff is read on root only). */
CCL_API cclResult_t cclBroadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                                 cclComm_t comm, cclStream_t stream);

/* In-place broadcast: cclBroadcast(buff, buff, ...). */
CCL_API cclResult_t cclBcast(void* buff, size_t count, cclDataType_t datatype, int root, cclComm_t comm,
                             cclStream_t stream);

/* recvbuff of `root` = op over ranks of sendbuff (recvbuff is written on root only). */
CCL_API cclResult_t cclReduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, cclRedOp_t op,
                              int root, cclComm_t comm, cclStream_t stream);

/* recvbuff (nranks*sendcount) = concatenation of every rank's sendbuff (sendcount), by rank. */
CCL_API cclResult_t cclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t datatype,
                                 cclComm_t comm, cclStream_t stream);

/* sendbuff holds nranks*recvcount; rank r gets op over ranks of block r in recvbuff (recvcount). */
CCL_API cclResult_t cclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cclDataType_t datatype,
                                     cclRedOp_t op, cclComm_t comm, cclStream_t stream);

/* Block j (count elements) of rank i's sendbuff lands as block i of rank j's recvbuff. */
CCL_API cclResult_t cclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                cclComm_t comm, cclStream_t stream);

/* Root's recvbuff (nranks*count) = every rank's sendbuff (count), by rank. */
CCL_API cclResult_t cclGather(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                              cclComm_t comm, cclStream_t stream);

/* Rank r's recvbuff (count) = block r of root's sendbuff (nranks*count). */
CCL_API cclResult_t cclScatter(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                               cclComm_t comm, cclStream_t stream);

/* ---- Point to point ----
 * Matched in call order per (sender, receiver) pair. Counts and types must agree.
 * Sends and receives that depend on each other must sit in one cclGroupStart/End.
 */
CCL_API cclResult_t cclSend(const void* sendbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                            cclStream_t stream);
CCL_API cclResult_t cclRecv(void* recvbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                            cclStream_t stream);

/* ---- Groups ----
 * Calls between cclGroupStart and the matching cclGroupEnd are validated when called and
 * run together at the outermost cclGroupEnd, which returns the first error of any of them.
 * Groups nest; one thread may drive several communicators inside one group. Calls on device
 * buffers use one stream per communicator (a program driving several devices gives each
 * communicator its own); cclGroupEnd returns once every one of them is enqueued. Calls on
 * host streams use one stream per group.
 */
CCL_API cclResult_t cclGroupStart(void);
CCL_API cclResult_t cclGroupEnd(void);

/* ---- Host streams ----
 * A host stream makes host-memory calls asynchronous, as a CUDA stream makes NCCL's: a call
 * given a host stream checks its arguments, enqueues the operation and returns; operations
 * run in the order they were enqueued, on a thread of the stream. Buffers must stay valid and
 * untouched until cclHostStreamSynchronize returns (or cclHostStreamQuery says cclSuccess).
 * A failure of an enqueued operation is reported by the next cclHostStreamSynchronize, by
 * cclCommGetAsyncError, and by the communicator's later calls (see cclCommAbort).
 *
 * One communicator's operations run in the order they were issued, whatever their streams:
 * a call on stream NULL, or on another stream, first waits until the communicator's
 * operations queued on a stream have run. Calls of one group use one stream.
 * cclCommDestroy and cclCommFinalize wait for the
 * communicator's queued operations; cclCommAbort makes them fail promptly.
 */
CCL_API cclResult_t cclHostStreamCreate(cclStream_t* stream);
/* Waits until every operation enqueued on `stream` has run, then frees it; NULL is accepted.
 * An open group (of another thread) holding calls for `stream` fails at its cclGroupEnd with
 * cclInvalidUsage and runs none of them. */
CCL_API cclResult_t cclHostStreamDestroy(cclStream_t stream);
/* Waits until every operation enqueued on `stream` so far has run. Returns the first failure
 * of those operations since the previous call (and cclGetLastError describes it). */
CCL_API cclResult_t cclHostStreamSynchronize(cclStream_t stream);
/* cclSuccess when every operation enqueued on `stream` has run, cclInProgress otherwise. */
CCL_API cclResult_t cclHostStreamQuery(cclStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Codecs, compressed collectives, error feedback and statistics. */
#include "ccl/compression.h" /* IWYU pragma: export */

#endif /* CCL_CCL_H_ */
