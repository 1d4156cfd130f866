/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ccl: what ccl adds to NCCL's interface: codecs (cclCompression_t, their error bounds),
 * compressed collectives (the *Ex calls and the communicator's compression policy), error
 * feedback state and the communicator's statistics. Part of ccl.h, which includes it;
 * including this file alone includes ccl.h.
 */
#ifndef CCL_COMPRESSION_H_
#define CCL_COMPRESSION_H_

#include "ccl/ccl.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* ---- Compressed collectives ----
 * A communicator compresses by policy: its default codec comes from cclConfig_t's
 * `compression`, else from CCL_CODEC (and CCL_CODEC_* parameters) in the environment, and
 * cclCommSetCompression changes it. CCL_CODEC=auto:LIST (e.g. auto:int8,int4) chooses per
 * call shape: uncompressed, or one codec of LIST (lossy codecs only from LIST; "auto" alone
 * allows none), and the algorithm, whichever the library's cost model predicts fastest on
 * the links CCL_LINK_MODEL describes (ALPHA_US:GBYTES_PER_S[:OVERHEAD_US], or
 * across=...,inside=...; the same on every rank), else on links probed at init, each level
 * by pairs of its ranks exchanging 8 bytes and 64 KiB to 1 MiB (grown until an exchange
 * takes 2 ms; the slowest pair's times; a few dozen exchanges of the library's own, which
 * are not calls: init may be inside a group, and cclStats_t counts none; once per process and pair of hosts: a later communicator whose pairs were all
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
 * of kind cclFeedbackNone keeps no error; powersgd keeps its warm start in it (above). A
 * state serves one operation at a time: one passed to two operations of a group makes that
 * group's cclGroupEnd fail with cclInvalidUsage, running none of them. (Without handles,
 * CCL_FEEDBACK's states: a group's later call that would share one runs on a fresh state.) */
CCL_API cclResult_t cclFeedbackCreate(cclFeedback_t* feedback, cclFeedbackKind_t kind, float beta, int resetPeriod);
/* Frees feedback state; NULL is accepted. Like a call's buffers, a handle given to a call must
 * live until that call has completed: past its cclGroupEnd, or, on a host stream, past the
 * stream's next cclHostStreamSynchronize (or cclHostStreamQuery saying cclSuccess). */
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
 * error-feedback state for this stream of sends: what encoding lost is added to the next.
 * A pair whose codecs differ is treated as one whose counts or types differ: the receive fails
 * with cclInvalidUsage (the send may have completed by then), the communicator is aborted on
 * every rank (their later calls fail), and an uncompressed receive may hold the bytes that
 * arrived (as an MPI receive of a message of another size). */
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CCL_COMPRESSION_H_ */
