// SPDX-License-Identifier: BSD-3-Clause
// The one registry of CCL_* environment variables. Every setting the library reads is a row
// of CCL_SETTINGS below (accessor, type, variable, default, help), and is read through its
// own typed accessor, config::timeout() for CCL_TIMEOUT and so on: a misspelt setting is a
// compile error. Values are read from the environment at each call, so a communicator
// created later sees the current setting; an unset or empty variable takes the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ccl::config {

// clang-format off
#define CCL_SETTINGS(X) \
  X(debug, String, "CCL_DEBUG", "WARN", "Log level on stderr: NONE, WARN, INFO or TRACE.") \
  X(debugSubsys, String, "CCL_DEBUG_SUBSYS", "ALL", "Layers whose INFO and TRACE lines are logged, comma-separated: COMMON, TRANSPORT, CODECS, COLLECTIVES, API, NCCL or ALL; a leading ^ logs every layer but those. WARN lines are always logged.") \
  X(timeout, Int, "CCL_TIMEOUT", "300", "Seconds any blocking wait may last before it fails with cclSystemError: 1 to 2147483 (config->timeoutMs overrides it per communicator).") \
  X(peerSilenceMs, Int, "CCL_PEER_SILENCE_MS", "500", "Milliseconds a ring neighbour's host may leave this rank's pulses unacknowledged before that rank is lost (its host crashed, lost power or its network): between calls and during them, the communicator then fails naming it. Pulses are one byte every quarter of this on a connection of their own, sent by the watcher thread. A process that is stopped or stuck still acknowledges them (its kernel does) and is reported by CCL_TIMEOUT instead. 0: no pulses (a silent host is found by CCL_TIMEOUT).") \
  X(socketIfname, String, "CCL_SOCKET_IFNAME", "", "Network interface for the bootstrap (default: the first one up other than loopback and the host-only bridges docker*, virbr*, veth*, br-*; then those bridges; then lo).") \
  X(socketFamily, String, "CCL_SOCKET_FAMILY", "AF_INET", "Address family for the bootstrap: AF_INET or AF_INET6.") \
  X(hostId, String, "CCL_HOST_ID", "", "This rank's host identity (printable text of at most 255 characters, hashed): ranks with equal identities form one node of their communicators. Unset: a hash of the host name and boot id, as NCCL's host hash. Lets ranks on one machine form several nodes (e.g. one per network namespace); cclConfig_t.hostId overrides it.") \
  X(transport, String, "CCL_TRANSPORT", "auto", "Transport between ranks on host memory: auto (shm), shm (ranks of one host through shared-memory rings, UCX between hosts), ucx (UCX for every pair), or local (every rank a thread of one process).") \
  X(ucxErrMode, String, "CCL_UCX_ERR_MODE", "auto", "UCX peer-failure handling: auto (peer on other hosts, none on this host so shared memory is used; ccl watches local peers itself), peer, none.") \
  X(algo, String, "CCL_ALGO", "auto", "Force an algorithm: auto, ring, tree (recursive doubling), direct (one round to every rank), twoshot, sparse (allreduce), hier (allreduce, reduce-scatter, allgather, broadcast, reduce, all-to-all: inside nodes and across them, collectives/hierarchical.cc), lowrank (allreduce with codec powersgd, which picks it by itself). auto: with a cost model (CCL_CODEC=auto or CCL_LINK_MODEL set) the algorithm the model predicts fastest for each call shape on host memory, else hier on a communicator of several nodes with more than one rank in some, else by size (CCL_TREE_MAX_BYTES, CCL_DIRECT_MAX_BYTES).") \
  X(chunkBytes, Int, "CCL_CHUNK_BYTES", "1M", "Pipeline chunk size of ring, chain and compressed algorithms.") \
  X(treeMaxBytes, Int, "CCL_TREE_MAX_BYTES", "64K", "Allreduce messages up to this size use recursive doubling (auto mode).") \
  X(directMaxBytes, Int, "CCL_DIRECT_MAX_BYTES", "1K", "Allreduce messages up to this size go from every rank to every rank in one round (auto mode).") \
  X(progressYield, Bool, "CCL_PROGRESS_YIELD", "1", "Yield the CPU when a progress loop finds nothing to do (for oversubscribed nodes).") \
  X(ncclLibrary, String, "CCL_NCCL_LIBRARY", "/usr/local/cuda/lib64/libnccl.so.2", "Real NCCL library the NCCL face forwards device-memory calls to in drop-in mode, and the api's device path uses with CCL_DEVICE_TRANSPORT=nccl (loaded with RTLD_LOCAL).") \
  X(deviceTransport, String, "CCL_DEVICE_TRANSPORT", "auto", "How the api's calls on device buffers move bytes: auto (nccl where every rank's device runs NVIDIA's NCCL, CCL_NCCL_LIBRARY loads and no two ranks share a GPU; else staged), staged (through pinned host memory over the communicator's transport; encoded streams at their true length) or nccl (a real NCCL communicator made at init on every rank, which must all set it; streams at their bound: quantizers write fixed-length streams, and calls whose bound is not smaller than the data go uncompressed). Under the NCCL face, device calls ccl compresses move over the face's own real communicator.") \
  X(stagingBytes, Int, "CCL_STAGING_BYTES", "256M", "Pinned host memory a communicator's staged device link (CCL_DEVICE_TRANSPORT=staged) holds at most, in its ring of 8 blocks: a wave larger than a block goes as several groups (sub-waves) that fit, each pair's messages split alike at both ends. A single message larger than a block's share of one peer still goes whole, in a block grown to fit it.") \
  X(deviceFlags, String, "CCL_DEVICE_FLAGS", "auto", "How a CUDA stream waits for and raises the flags a host thread shares with it (the staged link's): memop (stream memory operations, cuStreamWaitValue64/cuStreamWriteValue64: no kernel, no SM held while waiting), kernel (a one-thread kernel that polls or stores the flag), or auto (memop where the device supports 64-bit stream memory operations, else kernel).") \
  X(codec, String, "CCL_CODEC", "none", "Default codec of communicators, as cclCodecName spells it (ccl-info lists them), applied to the collectives CCL_COMPRESS enables. auto or auto:LIST (e.g. auto:int8,int4): per call, the cost model (collectives/plan/cost.h) runs uncompressed or with the codec of LIST, and the algorithm, it predicts fastest on CCL_LINK_MODEL; lossy codecs only from LIST.") \
  X(linkModel, String, "CCL_LINK_MODEL", "", "The links the cost model prices calls on (CCL_CODEC=auto's codec and algorithm; set alone, CCL_ALGO=auto's algorithm): ALPHA_US:GBYTES_PER_S[:OVERHEAD_US] for every message, or across=...,inside=... per level (between nodes, inside one), or probe; set on every rank or on none. probe, or empty under CCL_CODEC=auto: probed at init, each level by pairs of its ranks exchanging 8 bytes and 64 KiB-1 MiB, once per process and pair of hosts (later communicators reuse the figures). Empty otherwise: no model, algorithms by size.") \
  X(codecIntra, String, "CCL_CODEC_INTRA", "none", "Codec of the steps inside a node of hierarchical algorithms for the calls that are compressed (an uncompressed call stays exact inside nodes too), as cclCodecName spells it, with the CCL_CODEC_* parameters; none keeps them uncompressed. cclConfig_t.intraCompression overrides it.") \
  X(codecMinBytes, Int, "CCL_CODEC_MIN_BYTES", "64K", "Messages smaller than this many bytes are never compressed.") \
  X(compress, String, "CCL_COMPRESS", "allreduce,reducescatter", "Comma-separated collectives a communicator's default codec applies to: the compressible ones by name (allreduce, reducescatter, allgather, broadcast, alltoall, send, recv), sendrecv, all or none; any case. The default is the gradient reductions only: parameters and activations (all-gather, broadcast, all-to-all) stay exact unless named here.") \
  X(codecShm, String, "CCL_CODEC_SHM", "auto", "auto: a communicator whose peers are all reached through shared memory does not apply its default codec, nor do its calls on device buffers when all its ranks are on one node (CCL_HOST_ID or the host's identity): shared memory and NVLink move bytes faster than a codec encodes them. Codecs passed to *Ex calls still apply. on: apply it anyway.") \
  X(feedback, String, "CCL_FEEDBACK", "none", "Error feedback kept per buffer for compressed calls made without a feedback handle: none, ef (residual) or loco.") \
  X(codecBlock, Int, "CCL_CODEC_BLOCK", "0", "Quantizer block size (elements per scale); 0: the codec's default (128, mxfp8 32).") \
  X(codecScaleBits, Int, "CCL_CODEC_SCALE_BITS", "32", "Scale width of int codecs: 32 (fp32) or 16 (fp16).") \
  X(codecValueBits, Int, "CCL_CODEC_VALUE_BITS", "32", "Value width of sparsifiers: 32 (fp32) or 16 (fp16).") \
  X(codecKeep, Double, "CCL_CODEC_KEEP", "0.01", "Fraction of elements top-k and random-k keep.") \
  X(codecThreshold, Double, "CCL_CODEC_THRESHOLD", "0", "Threshold sparsifier: keep elements with |x| >= this.") \
  X(codecStochastic, Bool, "CCL_CODEC_STOCHASTIC", "0", "Quantizers round stochastically (1) or to nearest even (0).") \
  X(codecSeed, Int, "CCL_CODEC_SEED", "0", "Seed of stochastic rounding and random-k (combined with the call number), and of powersgd's first Q.") \
  X(codecRank, Int, "CCL_CODEC_RANK", "0", "Rank of powersgd's approximation; 0: the codec's default (4). The buffer is seen as a near-square matrix.") \
  X(locoBeta, Double, "CCL_LOCO_BETA", "0.5", "LoCo error feedback: weight of the previous error in the moving average.") \
  X(locoReset, Int, "CCL_LOCO_RESET", "0", "LoCo error feedback: clear the error every this many calls (0: never).")
// clang-format on

struct Var {
  const char* name;
  const char* defaultValue;
  const char* help;
};

// CCL_TIMEOUT's largest value in seconds: config->timeoutMs, an int of milliseconds, holds it
// (and a deadline that far ahead does not overflow a clock's nanoseconds).
constexpr int64_t kMaxTimeoutSeconds = 2147483;

// Every setting, in table order (ccl-info prints them).
const std::vector<Var>& all();

// Integers accept K/M/G suffixes (powers of 1024); booleans are 1/true/yes/on (any case).
// A value that does not parse throws Error(cclInvalidArgument) naming the variable.
using String = std::string;
using Int = int64_t;
using Double = double;
using Bool = bool;
#define CCL_SETTING_ACCESSOR(fn, type, name, def, help) type fn();
CCL_SETTINGS(CCL_SETTING_ACCESSOR)
#undef CCL_SETTING_ACCESSOR

}  // namespace ccl::config
