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
 * NULL, not a host stream) and all of a call's (and a group's) buffers in one memory;
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

/* Same values as ncclRedOp_t. Values >= cclNumOps are reserved for user-defined ops. */
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
 * that cross nodes use `compression`). Copied at init. NULL: CCL_CODEC_INTRA with the
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

/* ---- Compression ----
 * A codec turns fp32/bf16/fp16 elements into a self-describing byte stream. Quantizers keep
 * every element with a per-block scale; sparsifiers keep a subset of the elements exactly.
 * Non-finite values are never lost: a quantizer's block holding a NaN or an infinity travels
 * raw (or, in a fixed-length stream, arrives as NaN throughout), and a sparsifier's input
 * holding one arrives as NaN everywhere (a sample or a threshold could not drop it unseen),
 * so a training step's overflow check still sees it.
 */
typedef enum CCL_ENUM_TYPE {
  cclCodecNone = 0,         /* "none": the elements as fp32, bit-exact */
  cclCodecFp8E4m3 = 1,      /* "fp8_e4m3": fp8 e4m3 with an fp32 scale per block (default 128) */
  cclCodecFp8E5m2 = 2,      /* "fp8_e5m2": fp8 e5m2 with an fp32 scale per block (default 128) */
  cclCodecMxfp8E4m3 = 3,    /* "mxfp8_e4m3": OCP MX, e4m3 with a power-of-two e8m0 scale per block of 32 */
  cclCodecInt8 = 4,         /* "int8": symmetric absmax per block (default 128), fp32 or fp16 scales */
  cclCodecInt4 = 5,         /* "int4": as int8 with values -7..7, two per byte */
  cclCodecInt2 = 6,         /* "int2": as int8 with values -1..1, four per byte */
  cclCodecTopK = 7,         /* "topk": the k = keepRatio*n largest |x| (ties: lower index first) */
  cclCodecRandK = 8,        /* "randk": k = keepRatio*n positions drawn from `seed`, equal on every rank */
  cclCodecThreshold = 9,    /* "threshold": every element with |x| >= threshold */
  cclCodecPowerSgd = 10,    /* "powersgd": the buffer as a rows x cols matrix M, sent as a rank-r P Q^T (below) */
  cclCodecMxfp4 = 11,       /* "mxfp4": OCP MX, e2m1 with a power-of-two e8m0 scale per block of 32 */
  cclCodecNvfp4 = 12,       /* "nvfp4": e2m1 with an e4m3 scale per block of 16 times an fp32 scale per stream */
  cclCodecInt2Midrise = 13, /* "int2_midrise": 2 bits, four levels -1.5, -0.5, 0.5, 1.5 times s = absmax/1.5
                             * per block (default 128), fp32 or fp16 scales; no zero level (a 0 arrives as
                             * +-s/2, within the bound), a third less error than int2's three levels */
  cclNumCodecs = 14
} cclCodec_t;

#define CCL_COMPRESSION_MAGIC 0xcc1c0decu

/*
 * Codec choice and parameters. Always start from CCL_COMPRESSION_INITIALIZER; the library
 * reads only `size` bytes. Fields left at 0 take the codec's default.
 *
 * powersgd (Vogels et al. 2019) sends a rank-r approximation of the buffer seen as a
 * rows x cols matrix M (rows * cols = count; 0 and 0: cols = ceil(sqrt(count)), rows =
 * ceil(count / cols), zero-padded): one power iteration P = M Q, P orthonormalised, Q = M^T P,
 * so M ~ P Q^T travels as (rows + cols) * r fp32 values. Error feedback and the warm start are
 * independent, as in PyTorch's PowerSGD hook. The call's feedback handle keeps both:
 *   error feedback  with a handle of kind cclFeedbackResidual, M = x + the kept residual, and
 *                   the handle keeps M - P Q^T for the next call; a handle of kind
 *                   cclFeedbackNone adds and keeps no residual;
 *   warm start      with a handle of either kind, Q starts from the previous call's Q (the
 *                   first call: from `seed`), unless warmStart is -1: then from `seed` always.
 * Without a handle every call starts from `seed` and nothing is kept. Allreduce sums P and then Q over the ranks with
 * two uncompressed fp32 rings (orthonormalising P between them), on host memory, in groups and on host streams like any
 * call; send/recv carry P and Q. Other collectives, and device memory, refuse it. It has no element-wise error bound
 * (cclCodecErrorBound gives +inf): a matrix of rank <= r arrives exactly up to fp32 rounding, others lose what lies
 * outside the r directions found.
 */
typedef struct cclCompression_v1 {
  size_t size;             /* sizeof(cclCompression_t) as the caller saw it */
  unsigned int magic;      /* CCL_COMPRESSION_MAGIC */
  unsigned int version;    /* CCL_VERSION_CODE the caller was built with */
  cclCodec_t codec;        /* default cclCodecNone */
  int blockSize;           /* quantizers: elements per scale; a multiple of 8 up to 65536; 0: default */
  int bits;                /* int codecs: 0 or the codec's width. Sparsifiers: value bits, 32 (default) or 16 */
  int scaleBits;           /* int codecs: 32 (default, fp32 scales) or 16 (fp16 scales) */
  double keepRatio;        /* topk, randk: fraction of elements kept, in (0, 1]; default 0.01 */
  float threshold;         /* threshold: keep |x| >= threshold; must be >= 0 */
  int stochasticRounding;  /* quantizers: 1 rounds stochastically (unbiased); 0 (default) to nearest even */
  unsigned long long seed; /* stochastic rounding and randk; same seed, same output bits */
  int rank;                /* powersgd: rank r of the approximation (default 4; at most min(rows, cols)) */
  size_t rows, cols;       /* powersgd: the matrix shape, rows * cols == count, or both 0 (near-square) */
  int warmStart;           /* powersgd: 0 or 1 (default) starts Q from the feedback handle's last Q; -1 never */
} cclCompression_t;

#define CCL_COMPRESSION_INITIALIZER                                                                                  \
  {                                                                                                                  \
    sizeof(cclCompression_t), CCL_COMPRESSION_MAGIC, CCL_VERSION_CODE, cclCodecNone, 0, 0, 0, 0.0, 0.0f, 0, 0ULL, 0, \
        0, 0, 0                                                                                                      \
  }

/* The codec's name as listed in cclCodec_t ("int4", "topk", ...); "invalid" if out of range. Never NULL. */
CCL_API const char* cclCodecName(cclCodec_t codec);

/*
 * Parses a codec name (case-insensitive, as cclCodecName prints it) into *codec.
 * cclInvalidArgument if `name` or `codec` is NULL or the name is unknown.
 */
CCL_API cclResult_t cclCodecFromName(const char* name, cclCodec_t* codec);

/* The number of codecs of the library loaded (its cclNumCodecs; a library newer than the
 * caller's header may have more). Bindings build their codec enum from cclCodecName(0 ..
 * cclCodecCount() - 1), so a codec added to the library needs no edit in them. */
CCL_API int cclCodecCount(void);

/*
 * The documented error bound of a codec, for checking results: writes to *bound the largest
 * |y - x| that `quantizations` successive encode/decode round trips of one element may
 * cause, where
 *   absValue  is |x|, or for a reduction the sum over ranks of |input| at that element;
 *   absMax    bounds absValue over every element of the blocks the element travels in
 *             (for a reduction: the largest such sum in the buffer); for nvfp4, over every
 *             element of the streams (its per-stream scale comes from their largest);
 *   quantizations  is how many round trips to count: 1 for allgather, broadcast, all-to-all
 *             and send/recv; n - 1 for reduce-scatter over n ranks; n for allreduce over n
 *             ranks (the ring re-encodes n - 1 partial sums and the sum; two-shot, ccl's
 *             choice for quantizers, encodes n - 1 shards, each in blocks of its own, and the
 *             sum). Each error-feedback stage adds two.
 * compression NULL (or codec none) gives 0. Sparsifiers give absValue: each contribution
 * arrives exactly (or fp16-rounded) or not at all. Quantizers give, per round trip,
 * rel*|v| + abs*u with the codec's terms and scale unit u (s = absmax/qmax, 448, 57344,
 * MX's power of two, or nvfp4's 17/16 absmax/6 + 25 * 2^-10 absmax/2688), composed over the
 * partial results (mxfp4 and nvfp4: rel = abs = 1/4, stochastic 1/2); it includes the codecs' own fp32
 * arithmetic, not the algorithm's fp32 sums or a narrower output type's last rounding.
 * cclInvalidArgument unless 0 <= absValue <= absMax < inf and quantizations >= 0, or if the
 * parameters are invalid (as a collective would refuse them).
 */
CCL_API cclResult_t cclCodecErrorBound(const cclCompression_t* compression, double absValue, double absMax,
                                       int quantizations, double* bound);

/* ---- Version and errors ---- */

/* Writes CCL_VERSION_CODE of the loaded library to *version. */
CCL_API cclResult_t cclGetVersion(int* version);

/* A static, human-readable name for `result`; never NULL. */
CCL_API const char* cclGetErrorString(cclResult_t result);

/*
 * The message recorded by the last failing ccl call of this thread, naming the function
 * and the argument or condition at fault. Never NULL; empty when nothing failed yet. `comm`
 * is accepted for NCCL compatibility. Valid until the next failing call on this thread.
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
 * Every rank must pass the same id and nranks; 0 <= rank < nranks.
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
 * of 16-bit and fp8 types are computed in fp32 and rounded once per step. With stream NULL
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

/* ---- Compressed collectives ----
 * A communicator compresses by policy: its default codec comes from cclConfig_t's
 * `compression`, else from CCL_CODEC (and CCL_CODEC_* parameters) in the environment, and
 * cclCommSetCompression changes it. CCL_CODEC=auto:LIST (e.g. auto:int8,int4) chooses per
 * call shape: uncompressed, or one codec of LIST (lossy codecs only from LIST; "auto" alone
 * allows none), and the algorithm, whichever the library's cost model predicts fastest on
 * the links CCL_LINK_MODEL describes (ALPHA_US:GBYTES_PER_S[:OVERHEAD_US], or
 * across=...,inside=...; the same on every rank), else on links probed at init, each level
 * by pairs of its ranks exchanging 8 bytes and 64 KiB to 1 MiB (grown until an exchange
 * takes 2 ms; the slowest pair's times; a few dozen calls, so init cannot then be inside a
 * group; once per process and pair of hosts: a later communicator whose pairs were all
 * measured takes the slowest of those figures instead, unless 16 calls in a row of an
 * earlier one took over 3x or under 1/3 of their predicted time: its links are then
 * measured again),
 * with this CPU's kernel speeds timed at init (the ranks' slowest); a codec is taken only
 * when predicted more than 10 % faster. A codec passed to a call, or set with
 * cclCommSetCompression, replaces the choice; device buffers are not chosen for;
 * cclStats_t's autoChosen/autoCompressed count the choices. The *Ex calls take a per-call
 * codec (NULL: the communicator's) and an error-feedback handle (NULL: none, or the state
 * kept per buffer when CCL_FEEDBACK is ef or loco). A call is carried uncompressed when its
 * codec is cclCodecNone, its size is below CCL_CODEC_MIN_BYTES (under auto the model
 * decides instead), its type is not fp32/bf16/fp16, its op is not sum or avg, or
 * CCL_COMPRESS does not list the collective. CCL_COMPRESS defaults to the gradient
 * reductions (allreduce, reducescatter): all-gather, broadcast and all-to-all, which carry
 * parameters and activations, are exact unless it names them.
 * Compressed results are identical on every rank and within the codec's documented bound
 * composed over the algorithm (two-shot allreduce: two quantizations; ring: one per hop).
 *
 * Algorithms: CCL_ALGO names one for every call, or is auto. Under auto a communicator with
 * a cost model (CCL_CODEC=auto, or CCL_LINK_MODEL set, to links or to "probe") runs each call
 * shape on host memory with the algorithm the model predicts fastest for its codec (codecs
 * whose kernels it timed at init: none, CCL_CODEC's and auto's list); other calls, and
 * communicators without a model, follow size rules (CCL_TREE_MAX_BYTES, CCL_DIRECT_MAX_BYTES;
 * several nodes with more than one rank in some: hierarchical).
 */

/* Error-feedback state of one tensor: what compression lost in one call is added to the
 * input of the next. Residual: the plain error. LoCo: a moving average of the error with
 * weight beta, kept in 8 bits and cleared every resetPeriod calls (0: never). */
typedef struct cclFeedback* cclFeedback_t;
typedef enum CCL_ENUM_TYPE { cclFeedbackNone = 0, cclFeedbackResidual = 1, cclFeedbackLoco = 2 } cclFeedbackKind_t;

/* Creates feedback state. beta in [0, 1) (LoCo only), resetPeriod >= 0. The state sizes
 * itself on first use and is reset if later used with another size or collective. A state
 * of kind cclFeedbackNone keeps no error; powersgd keeps its warm start in it (above). */
CCL_API cclResult_t cclFeedbackCreate(cclFeedback_t* feedback, cclFeedbackKind_t kind, float beta, int resetPeriod);
/* Frees feedback state; NULL is accepted. */
CCL_API cclResult_t cclFeedbackDestroy(cclFeedback_t feedback);
/* The Euclidean norm, in fp64, of the error `feedback` keeps for its next call: what its last
 * call lost (LoCo: the moving average of it; 0 right after a reset), or 0 before any call
 * and for a state of kind none. A diagnostic: with the norm of what was sent it gives
 * Optimus-CC's ||memory|| / ||G||, and for powersgd (whose result P Q^T and kept error are
 * orthogonal parts of what it encoded) the energy its approximation captured. A state that
 * device-memory calls used keeps its error on the device: cclInvalidUsage. */
CCL_API cclResult_t cclFeedbackErrorNorm(cclFeedback_t feedback, double* norm);

/* Sets the communicator's default codec (NULL: none). Not collective: every rank must set
 * the same codec before the calls that use it, or those calls fail with cclInvalidUsage. */
CCL_API cclResult_t cclCommSetCompression(cclComm_t comm, const cclCompression_t* compression);

CCL_API cclResult_t cclAllReduceEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                   cclRedOp_t op, cclComm_t comm, cclStream_t stream,
                                   const cclCompression_t* compression, cclFeedback_t feedback);
CCL_API cclResult_t cclReduceScatterEx(const void* sendbuff, void* recvbuff, size_t recvcount, cclDataType_t datatype,
                                       cclRedOp_t op, cclComm_t comm, cclStream_t stream,
                                       const cclCompression_t* compression, cclFeedback_t feedback);
CCL_API cclResult_t cclAllGatherEx(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t datatype,
                                   cclComm_t comm, cclStream_t stream, const cclCompression_t* compression,
                                   cclFeedback_t feedback);
CCL_API cclResult_t cclAlltoAllEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype,
                                  cclComm_t comm, cclStream_t stream, const cclCompression_t* compression);
CCL_API cclResult_t cclBroadcastEx(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t datatype, int root,
                                   cclComm_t comm, cclStream_t stream, const cclCompression_t* compression);
/* Sender and receiver must pass the same codec. `feedback` (NULL: none) is the sender's
 * error-feedback state for this stream of sends: what encoding lost is added to the next. */
CCL_API cclResult_t cclSendEx(const void* sendbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                              cclStream_t stream, const cclCompression_t* compression, cclFeedback_t feedback);
CCL_API cclResult_t cclRecvEx(void* recvbuff, size_t count, cclDataType_t datatype, int peer, cclComm_t comm,
                              cclStream_t stream, const cclCompression_t* compression);

/* Counters of one kind of operation on one communicator, since it was created. */
typedef struct {
  unsigned long long calls;           /* operations issued */
  unsigned long long compressedCalls; /* of which carried compressed */
  unsigned long long rawBytes;        /* bytes sent, counted uncompressed */
  unsigned long long wireBytes;       /* bytes actually sent */
  double codecSeconds;                /* time spent encoding and decoding */
} cclOpStats_t;

typedef enum CCL_ENUM_TYPE {
  cclOpAllReduce = 0,
  cclOpBroadcast = 1,
  cclOpReduce = 2,
  cclOpAllGather = 3,
  cclOpReduceScatter = 4,
  cclOpAlltoAll = 5,
  cclOpGather = 6,
  cclOpScatter = 7,
  cclOpSend = 8,
  cclOpRecv = 9,
  cclNumOpKinds = 10
} cclOpKind_t;

/* The kind's name, the one spelling of it everywhere (CCL_COMPRESS, statistics, bindings):
 * "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather",
 * "scatter", "send", "recv"; "invalid" if out of range. Never NULL. */
CCL_API const char* cclOpKindName(cclOpKind_t kind);
/* Parses a name as cclOpKindName prints it (any case); cclInvalidArgument if unknown. */
CCL_API cclResult_t cclOpKindFromName(const char* name, cclOpKind_t* kind);
/* The number of operation kinds of the library loaded (its cclNumOpKinds). */
CCL_API int cclOpKindCount(void);
/* Parses a list of the collectives to compress as CCL_COMPRESS takes it (comma-separated
 * names as cclOpKindName prints them, any case; "all": every collective that can be
 * compressed; "sendrecv": send and recv; "none" or empty: nothing) into *mask, bit k set for
 * cclOpKind_t k. cclInvalidArgument for an unknown name or one that is never compressed
 * (reduce, gather, scatter); cclGetLastError(NULL) then lists the names. */
CCL_API cclResult_t cclCompressListParse(const char* list, unsigned int* mask);

/* Algorithms as CCL_ALGO names them, numbered 0 .. cclAlgorithmCount() - 1 (0 is "auto"):
 * the name of a number ("invalid" if out of range), and the number of a name (any of its
 * spellings CCL_ALGO takes; cclInvalidArgument if unknown). */
CCL_API const char* cclAlgorithmName(int algorithm);
CCL_API cclResult_t cclAlgorithmFromName(const char* name, int* algorithm);
CCL_API int cclAlgorithmCount(void);

/* Why a call went uncompressed although the communicator has a default codec (or, through
 * the NCCL face, why a call on device buffers went to NVIDIA's NCCL as it is). One reason per
 * call, the first that applies in this order. */
typedef enum CCL_ENUM_TYPE {
  cclUncompressedNotListed = 0,  /* CCL_COMPRESS does not name the collective */
  cclUncompressedCollective = 1, /* no compressed plan: reduce, gather, scatter */
  cclUncompressedOneNode = 2,    /* every rank on one node (CCL_CODEC_SHM=auto) */
  cclUncompressedAuto = 3,       /* CCL_CODEC=auto chose none, or device buffers under auto */
  cclUncompressedSmall = 4,      /* below CCL_CODEC_MIN_BYTES */
  cclUncompressedDataType = 5,   /* a type the codecs do not take (integers, fp64, fp8) */
  cclUncompressedOp = 6,         /* a reduction other than sum and average (PreMulSum, max, ...) */
  cclUncompressedCapture = 7,    /* the stream was being captured into a CUDA graph */
  cclUncompressedFeedback = 8,   /* LoCo feedback asked for on device buffers (host-side state) */
  cclUncompressedBound = 9,      /* the codec's streams at their bound are not smaller than the data */
  cclUncompressedStream = 10,    /* device buffers on the legacy default stream (NULL): the face only */
  cclNumUncompressedReasons = 11
} cclUncompressedReason_t;

/* The reason's name as statistics print it ("not_listed", "collective", "one_node", "auto",
 * "small", "dtype", "op", "capture", "feedback", "bound", "stream"); "invalid" if out of
 * range. */
CCL_API const char* cclUncompressedReasonName(cclUncompressedReason_t reason);
/* The number of reasons of the library loaded (its cclNumUncompressedReasons). */
CCL_API int cclUncompressedReasonCount(void);

/* ccl's options in NCCL 2.31's per-collective configuration (ncclCollConfig_t.ext, a list of
 * ncclConfigExt_t {key.vendorId, key.optionId, val}), read by the NCCL face's nccl*Config
 * calls, so an NCCL program can choose compression per call without this header:
 *   vendorId CCL_NCCL_VENDOR_ID, optionId CCL_NCCL_OPTION_CODEC, val.s a codec's name as
 *   cclCodecName spells it ("int8", "fp8_e4m3", ..., "none"): the call takes that codec, with
 *   the CCL_CODEC_* parameters, as an *Ex call's compression (whatever CCL_COMPRESS says).
 * Other vendors' options are ignored; an unknown option of ccl's, a duplicate or a name that is
 * not a codec's is ncclInvalidArgument. */
#define CCL_NCCL_VENDOR_ID 0x0cc1a5
#define CCL_NCCL_OPTION_CODEC 1

#define CCL_STATS_MAGIC 0xcc15a7a5u
typedef struct cclStats_v1 {
  size_t size;          /* sizeof(cclStats_t) as the caller saw it */
  unsigned int magic;   /* CCL_STATS_MAGIC */
  unsigned int version; /* CCL_VERSION_CODE */
  cclOpStats_t op[cclNumOpKinds];
  /* Per kind of operation, calls whose algorithm the cost model chose (and under
   * CCL_CODEC=auto their codec), and of those the calls it chose to compress (a lossy codec
   * the user allowed; only under CCL_CODEC=auto).
   * Appended to version 1: a caller whose size ends before them gets the fields it has. */
  unsigned long long autoChosen[cclNumOpKinds];
  unsigned long long autoCompressed[cclNumOpKinds];
  /* Commands the communicator's calls on device buffers have enqueued on CUDA streams (the
   * callers' and its own): kernels, copies (a batch of copies one), events recorded and
   * waited for, stream memory operations and host functions; and of those the host
   * functions (cudaLaunchHostFunc). A call's share is the difference of two readings.
   * Appended to version 1, as above. */
  unsigned long long deviceCommands;
  unsigned long long deviceHostFunctions;
  /* Calls the communicator's default codec did not compress, by cclUncompressedReason_t
   * (calls of every kind together); calls of a communicator without a default codec are not
   * counted. Through the NCCL face, calls on device buffers sent to NVIDIA's NCCL as they are
   * count here too. Appended to version 1, as above. */
  unsigned long long uncompressed[cclNumUncompressedReasons];
  /* Of the bytes every kind of operation sent (cclOpStats_t rawBytes and wireBytes), those
   * sent to ranks of other nodes (cclCommTopology); 0 on a communicator of one node.
   * Appended to version 1, as above. */
  unsigned long long acrossRawBytes;
  unsigned long long acrossWireBytes;
} cclStats_t;
#define CCL_STATS_INITIALIZER \
  { sizeof(cclStats_t), CCL_STATS_MAGIC, CCL_VERSION_CODE, {{0, 0, 0, 0, 0.0}}, {0}, {0}, 0, 0, {0}, 0, 0 }

/* Copies the communicator's counters into *stats (only stats->size bytes are written). */
CCL_API cclResult_t cclCommGetStats(cclComm_t comm, cclStats_t* stats);

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
/* Waits until every operation enqueued on `stream` has run, then frees it; NULL is accepted. */
CCL_API cclResult_t cclHostStreamDestroy(cclStream_t stream);
/* Waits until every operation enqueued on `stream` so far has run. Returns the first failure
 * of those operations since the previous call (and cclGetLastError describes it). */
CCL_API cclResult_t cclHostStreamSynchronize(cclStream_t stream);
/* cclSuccess when every operation enqueued on `stream` has run, cclInProgress otherwise. */
CCL_API cclResult_t cclHostStreamQuery(cclStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CCL_CCL_H_ */
