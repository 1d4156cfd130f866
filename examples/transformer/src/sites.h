// SPDX-License-Identifier: BSD-3-Clause
// The trainer's communication sites: every collective it makes names one, and the site
// decides the communicator (the rank's group), the codec it may carry and where its bytes
// and seconds are counted.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>

namespace gpt {

// The communicators of a rank (grid.h makes them).
enum class Group { kWorld, kTp, kPp, kDp, kEmb, kCount };

enum class Site { kTpFwd, kTpBwd, kTpGrad, kPpFwd, kPpBwd, kDpGrad, kDpParam, kEmbSync, kStat, kEval, kCount };

// Which part of a site's traffic a codec can be limited to: blocks for the tensor-parallel
// sites, the sending stages for the pipeline and data-parallel ones.
enum class Scope { kNone, kLayers, kStages };

struct SiteInfo {
  Site site;
  const char* name;
  Group group;
  bool compressible;  // --compress may give it a codec
  Scope scope;
  const char* what;
};

// Every site, in Site order: its name in logs, flags and traces, its communicator, whether
// it may be compressed, and what it carries.
inline constexpr SiteInfo kSites[] = {
    {Site::kTpFwd, "tp.fwd", Group::kTp, true, Scope::kLayers,
     "forward: each row-parallel layer's output summed (all-reduce; sequence parallel: reduce-scatter) and, with "
     "sequence parallelism, each column-parallel layer's input all-gathered"},
    {Site::kTpBwd, "tp.bwd", Group::kTp, true, Scope::kLayers,
     "backward: each column-parallel layer's input gradient summed (all-reduce; sequence parallel: reduce-scatter) "
     "and, with sequence parallelism, each row-parallel layer's output gradient all-gathered"},
    {Site::kTpGrad, "tp.grad", Group::kTp, false, Scope::kNone,
     "sequence parallel: the gradients of the tensors every tensor-parallel rank holds whole (LayerNorms, "
     "row-parallel biases, embeddings), summed over the group once per step"},
    {Site::kPpFwd, "pp.fwd", Group::kPp, true, Scope::kStages, "activations sent to the next pipeline stage"},
    {Site::kPpBwd, "pp.bwd", Group::kPp, true, Scope::kStages,
     "activation gradients sent to the previous pipeline stage"},
    {Site::kDpGrad, "dp.grad", Group::kDp, true, Scope::kStages,
     "gradients averaged over the data-parallel group (all-reduce in buckets; ZeRO-1: reduce-scatter)"},
    {Site::kDpParam, "dp.param", Group::kDp, false, Scope::kNone,
     "ZeRO-1: updated parameters (and, for checkpoints, AdamW state) all-gathered; with --elastic, each rank's "
     "AdamW shard copied to the previous rank after each step"},
    {Site::kEmbSync, "emb.sync", Group::kEmb, true, Scope::kNone,
     "wte's gradient summed between the first and the last pipeline stage"},
    {Site::kStat, "stat", Group::kWorld, false, Scope::kNone,
     "loss and gradient norm, logs, checkpoints and the trace"},
    {Site::kEval, "eval", Group::kWorld, false, Scope::kNone,
     "validation's tensor- and pipeline-parallel traffic (counted apart)"},
};
static_assert(std::size(kSites) == static_cast<size_t>(Site::kCount));

constexpr const SiteInfo& siteInfo(Site s) { return kSites[static_cast<size_t>(s)]; }
inline const char* siteName(Site s) { return siteInfo(s).name; }
// Site by name (false: no such site).
bool siteFromName(const std::string& name, Site* out);

}  // namespace gpt
