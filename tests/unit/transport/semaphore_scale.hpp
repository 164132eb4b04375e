// Semaphores at communicator scale (DESIGN.md, "Transport"), shared by the host test
// (test_semaphore_pool.cpp) and the GPU one (tests/gpu/test_gpu_cuda_ipc.cpp): every rank makes
// `perPair` semaphores with every peer, as a few plans would, and checks that what it holds grows
// with the slabs they are carved from, not with the semaphores: open descriptors
// (/proc/self/fd) against a fixed budget, and imported memories per peer. Then every semaphore is
// signalled a different number of times and must count exactly its own signals, and once they
// are all gone at most a slab's descriptors may stay.
#pragma once

#include <string>

#include "transport_test_util.hpp"

namespace tessera::test {

struct SemaphoreScale {
  TransportKind kind = TransportKind::kShm;
  RankMode mode = RankMode::kProcesses;
  int perPair = 256;
  // Descriptors one rank may add by making all its semaphores (thread ranks share one table, so
  // they get nranks times as many, counted by rank 0).
  int fdBudgetPerRank = 32;
  // Distinct imported memories the semaphores with one peer may use (one per slab of the peer).
  size_t importsPerPeer = 4;
  // Descriptors one rank may keep once every semaphore is gone (the slab it would take the next
  // slot from).
  int fdsKeptPerRank = 4;
};

// Open descriptors of this process (the directory's own is not counted); -1 when unreadable.
int openFds();

// Round-robin pairing (the circle method) for an even number of ranks n: in round r
// (0 <= r < n - 1) every rank meets exactly one peer and every pair meets once, so pairwise calls
// never wait for a third rank.
int roundPartner(int rank, int round, int n);

// The rank body: "" when every check held. Needs an even number of ranks.
std::string manySemaphores(TransportContext& ctx, const SemaphoreScale& scale);

}  // namespace tessera::test
