// SPDX-License-Identifier: BSD-3-Clause
// ccl-info: version, build options, transports, codecs, this host's identity (which ranks
// form a node) and every CCL_* variable with its help.
#include <cstdio>
#include <cstdlib>

#include "ccl/ccl.h"
#include "codecs/codec_table.h"
#include "common/config.h"
#include "common/error.h"
#include "common/host_id.h"
#include "transport/factory.h"

int main() {
  int version = 0;
  cclGetVersion(&version);
  std::printf("ccl %d.%d.%d (version code %d)\n", version / 10000, (version / 100) % 100, version % 100, version);
  std::printf("build: UCX=%s CUDA=%s NCCL=%s\n", CCL_HAVE_UCX ? "on" : "off", CCL_HAVE_CUDA ? "on" : "off",
              CCL_HAVE_NCCL ? "on" : "off");
  std::printf("transports (host memory; CCL_TRANSPORT=auto takes the first): %s\n",
              ccl::transport::availableTransports().c_str());
  std::printf("codecs (CCL_CODEC, cclCodecFromName):");
  for (int c = 0; c < cclNumCodecs; ++c) std::printf(" %s", ccl::codec::codecInfo(c).name);
  // Ranks printing the same identity form one node of their communicators (cclCommTopology).
  try {
    const ccl::host::Identity id = ccl::host::resolve(nullptr);
    std::printf("\nhost identity (ranks with equal ones form a node): %016llx from %s",
                static_cast<unsigned long long>(id.id), id.source.c_str());
  } catch (const ccl::Error& e) {
    std::printf("\nhost identity: refused: %s", e.what());
  }
  std::printf("\n\nenvironment variables (current value, default):\n");
  for (const auto& v : ccl::config::all()) {
    const char* cur = std::getenv(v.name);
    std::printf("  %-22s = %-10s (default %s)\n      %s\n", v.name, cur ? cur : "", v.defaultValue, v.help);
  }
  return 0;
}
