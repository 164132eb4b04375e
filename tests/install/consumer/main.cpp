// Uses the installed C++ API.
#include <cstdio>
#include <memory>
#include <tessera/tessera.hpp>
#include <vector>

int main() {
  std::vector<std::unique_ptr<tessera::Communicator>> comms;
  if (tessera::Communicator::initAll(3, nullptr, &comms) != tsrSuccess) {
    std::fprintf(stderr, "%s\n", tsrGetLastError(nullptr));
    return 1;
  }
  int count = 0;
  if (comms[2]->count(&count) != tsrSuccess || count != 3) return 2;
  std::printf("consumer (C++): 3 ranks OK\n");
  return 0;
}
