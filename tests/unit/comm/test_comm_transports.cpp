// The communicator's transport context: made on first use, connections chosen per peer, and
// aborted with the communicator.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "tessera/tessera.hpp"
#include "transport/semaphore.hpp"

namespace tessera {
namespace {

TEST(CommTransports, ThreadRanksConnectOverInprocAndSignal) {
  std::vector<std::unique_ptr<Communicator>> comms;
  int devs[] = {TSR_DEVICE_HOST, TSR_DEVICE_HOST};
  ASSERT_EQ(Communicator::initAll(2, devs, &comms), tsrSuccess) << lastErrorMessage();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const char* what) {
        errors[static_cast<size_t>(r)] = std::string(what) + ": " + lastErrorMessage();
      };
      TransportContext* ctx = nullptr;
      if (tessera::commImpl(*comms[static_cast<size_t>(r)])->transports(&ctx) != tsrSuccess)
        return fail("transports");
      TransportContext* again = nullptr;
      if (tessera::commImpl(*comms[static_cast<size_t>(r)])->transports(&again) != tsrSuccess ||
          again != ctx)
        return fail("second transports() call must return the same context");
      std::shared_ptr<Connection> conn;
      if (ctx->connect(1 - r, &conn) != tsrSuccess) return fail("connect");
      if (conn->kind() != TransportKind::kInproc) return fail("expected inproc between threads");
      std::shared_ptr<Memory> mem;
      if (ctx->allocate(64, MemoryKind::kHost, &mem) != tsrSuccess) return fail("allocate");
      static_cast<uint8_t*>(mem->data())[0] = static_cast<uint8_t>(10 + r);
      std::shared_ptr<RemoteMemory> remote;
      if (ctx->exchangeMemory(*conn, *mem, &remote) != tsrSuccess) return fail("exchange");
      std::shared_ptr<Semaphore> sem;
      if (ctx->createSemaphore(conn, &sem) != tsrSuccess) return fail("semaphore");
      if (conn->put(*remote, 1, *mem, 0, 1) != tsrSuccess || sem->signal() != tsrSuccess)
        return fail("put+signal");
      if (sem->wait(10) != tsrSuccess) return fail("wait");
      if (static_cast<uint8_t*>(mem->data())[1] != 10 + (1 - r)) return fail("data");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace
}  // namespace tessera
