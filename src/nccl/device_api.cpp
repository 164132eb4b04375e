// The host functions of NCCL's device API (nccl_device/*.h) that return something other than an
// ncclResult_t. Programs built against NCCL 2.29+ headers (nccl-tests among them) link them even
// when they never use the device API, so they are exported; the API itself is not implemented
// (its ncclResult_t functions are refused, refused.cpp), and these say so where they cannot
// give NCCL's answer.
//
// nccl_device.h needs CUDA's compiler, so it is not included: ncclTeam_t is declared here with
// NCCL's layout ({nRanks, rank, stride}, returned by value as NCCL's declaration returns it).
#include "nccl/shim.hpp"

namespace {

struct Team {
  int nRanks, rank, stride;
};

// The world team of a live communicator; {0, 0, 1} with an error for a bad handle.
Team world(ncclComm_t comm, const char* api) {
  ncclComm* c = nullptr;
  if (tessera::nccl::lookup(comm, api, &c) != ncclSuccess) return Team{0, 0, 1};
  return Team{c->nranks, c->rank, 1};
}

}  // namespace

extern "C" {

Team ncclTeamWorld(ncclComm_t comm) { return world(comm, "ncclTeamWorld"); }

// The load/store-accessible (LSA) team: tessera gives NCCL's device API no peer memory, so the
// team holds the caller alone (what NCCL reports for a rank without P2P peers).
Team ncclTeamLsa(ncclComm_t comm) {
  Team w = world(comm, "ncclTeamLsa");
  return Team{w.nRanks > 0 ? 1 : 0, 0, 1};
}

// The rail team: the outer factor of the LSA team, with an LSA team of one the world.
Team ncclTeamRail(ncclComm_t comm) { return world(comm, "ncclTeamRail"); }

// Rank `rank` of `team` in the world: teams are strided sets of world ranks around the caller.
int ncclTeamRankToWorld(ncclComm_t comm, Team team, int rank) {
  Team w = world(comm, "ncclTeamRankToWorld");
  return w.rank + (rank - team.rank) * team.stride;
}

// Its rank in the LSA team (the caller alone): 0 for the caller, -1 for anyone else.
int ncclTeamRankToLsa(ncclComm_t comm, Team team, int rank) {
  Team w = world(comm, "ncclTeamRankToLsa");
  return w.rank + (rank - team.rank) * team.stride == w.rank ? 0 : -1;
}

// Slots of NCCL's LL all-to-all device primitive: not implemented (ncclLLA2ACreateRequirement is
// refused); 0 slots, and ncclGetLastError says why.
int ncclLLA2ACalcSlots(int /*maxElts*/, int /*maxEltSize*/) {
  tessera::nccl::tesseraNcclRefuse("ncclLLA2ACalcSlots");
  return 0;
}

}  // extern "C"
