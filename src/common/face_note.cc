// SPDX-License-Identifier: BSD-3-Clause
#include "common/face_note.h"

#include <link.h>

#include <cstdint>
#include <cstring>

namespace ccl {
namespace {

struct FaceSearch {
  uintptr_t addr;
  bool marked = false;
};

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

bool hasFaceNote(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info.dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align == 8 ? 8 : 4;
    auto p = static_cast<uintptr_t>(info.dlpi_addr + ph.p_vaddr);
    const uintptr_t end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = reinterpret_cast<const char*>(n + 1);
      if (n->n_type == CCL_FACE_NOTE_TYPE && n->n_namesz == 4 && std::memcmp(name, "ccl", 4) == 0) return true;
      p += sizeof(*n) + alignUp(n->n_namesz, align) + alignUp(n->n_descsz, align);
    }
  }
  return false;
}

// dl_iterate_phdr callback: stops at the object whose loaded segments hold `addr`.
int findFace(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<FaceSearch*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && s->addr >= start && s->addr < start + ph.p_memsz) {
      s->marked = hasFaceNote(*info);
      return 1;
    }
  }
  return 0;
}

}  // namespace

bool insideCclFace(const void* addr) {
  FaceSearch s{reinterpret_cast<uintptr_t>(addr)};
  dl_iterate_phdr(findFace, &s);
  return s.marked;
}

}  // namespace ccl
