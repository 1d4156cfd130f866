// SPDX-License-Identifier: BSD-3-Clause
// What travels between the bootstrap's ranks and its root: the layout of cclUniqueId and
// the fixed-size messages of the rendezvous and of the ring. Both ends run the same build,
// so the structs travel in host byte order.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ccl/ccl.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

namespace ccl::bootstrap {

constexpr size_t kSecretBytes = 32;
constexpr uint64_t kIdMagic = 0x31306469'2d6c6363ull;     // "ccl-id01"
constexpr uint64_t kHelloMagic = 0x3230686c'2d6c6363ull;  // "ccl-hl02"
constexpr uint64_t kRingMagic = 0x32306772'2d6c6363ull;   // "ccl-rg02"

struct IdLayout {
  uint64_t magic;
  uint8_t secret[kSecretBytes];
  WireAddr root;
};
static_assert(sizeof(IdLayout) <= CCL_UNIQUE_ID_BYTES);

// Rank -> root: who I am and where my ring listener is, and which derivation of the parent
// I join ({0, 0} for a fresh id; bootstrap.h, Derivation): ranks holding different views of
// who takes part fail instead of forming a communicator.
struct Hello {
  uint64_t magic;
  uint8_t secret[kSecretBytes];
  int32_t rank;
  int32_t nranks;
  WireAddr listen;
  uint64_t agreement;
  uint64_t derivation;  // Derivation::number
};

// Hello::rank of a probe: the root of a derived rendezvous tells a rank that its
// communicator leaves out that it is forming (Bootstrap::derivedId). A root that receives one
// is forming another communicator from the same parent: the ranks disagree on who is gone.
constexpr int32_t kProbeRank = -2;

// Root -> rank: status (a cclResult_t) and, on success, nranks WireAddr follow.
struct Reply {
  int32_t status;
  char message[124];
};

// Rank -> next rank in the ring, right after connecting; once on each of its two connections:
// the ring's (allGather, barrier, broadcast, goodbyes) and the pulses' (Bootstrap::pulse).
constexpr int32_t kRingChannel = 0;
constexpr int32_t kPulseChannel = 1;
constexpr int kChannels = 2;
// RingProof::channel of a liveness probe: a ring neighbour checks during the init that this
// rank's listener is still open (bootstrap.cc, listenerRefuses). acceptPrev drops it unread.
constexpr int32_t kLivenessChannel = -1;

struct RingProof {
  uint64_t magic;
  uint8_t secret[kSecretBytes];
  int32_t rank;
  int32_t nranks;
  int32_t channel;
  int32_t reserved;
};

// Tells the rendezvous service of an id made in this process (createUniqueId) the size of
// the communicator this process joins with it, so the service refuses hellos that claim
// another size; two calls with different sizes leave it to the hellos' agreement. Does
// nothing for an id made elsewhere.
void noteCreatorRanks(const uint8_t* secret, int nranks);

// A derived rendezvous served on a rank's listener (serveRendezvous): the handle by which
// the next one served on that listener stops it first and takes over the connections it
// holds for later derivations.
struct DerivedService;

// Starts the rendezvous service of a derived id (Bootstrap::derivedId) on `listener`, which
// must listen at id.root, for labels.size() ranks whose hellos carry `derivation`; labels[r]
// is rank r's rank in the parent, which errors name. It ends once they joined, a hello
// disagreed or gave it up (a later derivation's), or the timeout passed. `probes`:
// connections to the ranks left out, each sent a probe hello; an answer with an error fails
// this rendezvous too. `previous` (may be null): the service this listener served before,
// stopped here first; its ranks still waiting are told it was superseded.
std::shared_ptr<DerivedService> serveRendezvous(Socket listener, const IdLayout& id, const Derivation& derivation,
                                                std::vector<Socket> probes, std::vector<int> labels,
                                                std::shared_ptr<DerivedService> previous);

// Compares secrets without an early exit so timing does not reveal a matching prefix.
inline bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace ccl::bootstrap
