// ccl-info: version, build options, transports and every CCL_* variable with its help.
#include <cstdio>
#include <cstdlib>

#include "ccl/ccl.h"
#include "common/config.h"

int main() {
  int version = 0;
  cclGetVersion(&version);
  std::printf("ccl %d.%d.%d (version code %d)\n", version / 10000, (version / 100) % 100, version % 100, version);
  std::printf("build: UCX=%s CUDA=%s NCCL=%s\n", CCL_HAVE_UCX ? "on" : "off", CCL_HAVE_CUDA ? "on" : "off",
              CCL_HAVE_NCCL ? "on" : "off");
  std::printf("transports: %s\n", CCL_HAVE_UCX ? "ucx (host memory)" : "none");
  std::printf("\nenvironment variables (current value, default):\n");
  for (const auto& v : ccl::config::all()) {
    const char* cur = std::getenv(v.name);
    std::printf("  %-22s = %-10s (default %s)\n      %s\n", v.name, cur ? cur : "", v.defaultValue, v.help);
  }
  return 0;
}
