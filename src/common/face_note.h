// SPDX-License-Identifier: BSD-3-Clause
// The mark every copy of ccl's NCCL face carries: an allocated ELF note (name "ccl", type
// kFaceNoteType, no descriptor) that the linker puts in a PT_NOTE segment, which stays mapped.
// Names cannot tell a copy of the face from NVIDIA's library (both export the same ones), nor
// can load addresses (each copy has its own); the note can. The face emits the note; anything
// that loads "the real NCCL" (the face, the NCCL transport) asks here before trusting it.
#pragma once

#define CCL_FACE_NOTE_TYPE 0x63636c66  // "cclf"

namespace ccl {

// True when `addr` lies inside a loaded object that carries the face's note.
bool insideCclFace(const void* addr);

}  // namespace ccl
