// TESSERA_DUMP_ON_TIMEOUT: hang diagnosis. With it set, a call whose wait passes its deadline
// logs what each of its operations waits for (collective, call number, plan step, semaphore
// value expected and seen) and sends SIGUSR1 to the processes of the same host that share a
// communicator with it; a process that gets SIGUSR1 makes each of its threads waiting in a call
// log the same at its next wake-up (within a park slice). So one host's log shows which rank
// every rank waits for. Processes only take SIGUSR1 once they made a collective engine with
// the variable set, and a peer is signalled only if it catches SIGUSR1 (/proc/PID/status
// SigCgt), never killed by the default action.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// Whether TESSERA_DUMP_ON_TIMEOUT is set (read at each call).
bool dumpOnTimeout();
// Installs the SIGUSR1 handler once per process (only where dumpOnTimeout()).
void installDumpSignal();
// Incremented by each SIGUSR1: a waiting thread that sees it change logs its operations.
uint64_t dumpGeneration();
// SIGUSR1 to each pid (>0, not this process) that catches SIGUSR1; returns how many were sent.
int signalDumpPeers(const std::vector<int>& pids);

}  // namespace tessera
