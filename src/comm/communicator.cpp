// tessera::Communicator: validates arguments, then hands over to CommImpl.
#include <thread>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "core/cuda_driver.hpp"
#include "core/env.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kInit;

Result checkRankArgs(const char* api, int nranks, int rank) {
  if (nranks < 1 || nranks > kMaxBootstrapRanks)
    return TSR_FAIL(tsrInvalidArgument, "%s: nranks = %d, must be in [1, %d]", api, nranks,
                    kMaxBootstrapRanks);
  if (rank < 0 || rank >= nranks)
    return TSR_FAIL(tsrInvalidArgument, "%s: rank %d is outside [0, %d)", api, rank, nranks);
  return tsrSuccess;
}

}  // namespace

Communicator::Communicator(std::shared_ptr<CommImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

tsrResult_t Communicator::getUniqueId(tsrUniqueId* id) {
  if (id == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrGetUniqueId: uniqueId is NULL");
  TSR_CHECK(envValidateAll());
  return createUserUniqueId(id);
}

namespace {

// A rank of a tcp-bootstrapped communicator (tsrCommInitRank, tsrCommGrow) with its config
// resolved: `api` names the call in errors.
tsrResult_t initTcpRank(const char* api, int nranks, const tsrUniqueId& id, int rank,
                        const CommConfig& cfg, std::unique_ptr<Communicator>* out) {
  TSR_CHECK(checkRankArgs(api, nranks, rank));
  // A corrupted id fails here, at once, even for a non-blocking init.
  UniqueIdContents contents;
  if (Result r = decodeUniqueId(id, &contents); r != tsrSuccess) return addContext(r, "%s", api);
  BootstrapOptions opts;  // timeout: tsrConfig_t.timeoutMs, else TESSERA_BOOTSTRAP_TIMEOUT
  opts.timeoutSeconds = cfg.timeoutSeconds;
  auto factory = [id, rank, nranks, opts](int cancelFd, std::unique_ptr<Bootstrap>* b) {
    BootstrapOptions o = opts;
    o.cancelFd = cancelFd;
    return TcpBootstrap::create(id, rank, nranks, o, b);
  };
  std::shared_ptr<CommImpl> impl;
  Result r = CommImpl::create(rank, nranks, cfg, factory, &impl);
  if (r != tsrSuccess && r != tsrInProgress) return r;
  *out = CommAccess::wrap(std::move(impl));
  return r;
}

}  // namespace

tsrResult_t Communicator::initRank(int nranks, const tsrUniqueId& id, int rank,
                                   const tsrConfig_t* config, std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommInitRank: comm is NULL");
  out->reset();
  TSR_CHECK(checkRankArgs("tsrCommInitRank", nranks, rank));
  ScopedRank scoped(rank);
  TSR_CHECK(envValidateAll());
  CommConfig cfg;
  TSR_CHECK(resolveConfig(config, nullptr, &cfg));
  return initTcpRank("tsrCommInitRank", nranks, id, rank, cfg, out);
}

tsrResult_t Communicator::growUniqueId(tsrUniqueId* id) {
  if (id == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommGetUniqueId: uniqueId is NULL");
  ScopedRank scoped(impl_->rank());
  return impl_->growUniqueId(id);
}

tsrResult_t Communicator::grow(Communicator* existing, int nranks, const tsrUniqueId* id, int rank,
                               const tsrConfig_t* config, std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommGrow: newcomm is NULL");
  out->reset();
  TSR_CHECK(envValidateAll());
  if (existing == nullptr) {
    // A new rank: it only joins.
    if (id == nullptr)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrCommGrow: a new rank (comm NULL) needs the unique id of "
                      "tsrCommGetUniqueId");
    ScopedRank scoped(rank);
    CommConfig cfg;
    TSR_CHECK(resolveConfig(config, nullptr, &cfg));
    return initTcpRank("tsrCommGrow", nranks, *id, rank, cfg, out);
  }
  CommImpl& impl = *existing->impl_;
  ScopedRank scoped(impl.rank());
  if (rank != -1)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrCommGrow: rank is %d; an existing rank keeps its rank %d and passes -1",
                    rank, impl.rank());
  tsrUniqueId agreed;
  CommConfig cfg;
  TSR_CHECK(impl.growAgree(nranks, id, config, &agreed, &cfg));
  return initTcpRank("tsrCommGrow", nranks, agreed, impl.rank(), cfg, out);
}

tsrResult_t Communicator::initAll(int ndev, const int* devlist,
                                  std::vector<std::unique_ptr<Communicator>>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommInitAll: comms is NULL");
  // One thread per rank while they are created: bound it well below the thread limit.
  constexpr int kMaxThreadRanks = 4096;
  if (ndev < 1 || ndev > kMaxThreadRanks)
    return TSR_FAIL(tsrInvalidArgument, "tsrCommInitAll: ndev = %d, must be in [1, %d]", ndev,
                    kMaxThreadRanks);
  TSR_CHECK(envValidateAll());
  std::string why;
  int ndevices = cudaDeviceCount(&why);
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    int d = devlist != nullptr ? devlist[i] : (ndevices > 0 ? i % ndevices : TSR_DEVICE_HOST);
    if (d < TSR_DEVICE_HOST || (d >= 0 && d >= ndevices))
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrCommInitAll: devlist[%d] = %d is not a CUDA device "
                      "(%d devices%s%s) nor TSR_DEVICE_HOST",
                      i, d, ndevices, why.empty() ? "" : ": ", why.c_str());
    devices[static_cast<size_t>(i)] = d;
  }
  BootstrapOptions opts;
  std::shared_ptr<InprocGroup> group;
  TSR_CHECK(InprocBootstrap::createGroup(ndev, opts, &group));

  std::vector<std::shared_ptr<CommImpl>> impls(static_cast<size_t>(ndev));
  std::vector<Result> results(static_cast<size_t>(ndev), tsrSuccess);
  std::vector<std::string> errors(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      ScopedRank scoped(i);
      CommConfig cfg;
      Result r = resolveConfig(nullptr, nullptr, &cfg);
      cfg.blocking = true;
      cfg.device = devices[static_cast<size_t>(i)];
      if (r == tsrSuccess) {
        r = CommImpl::create(
            i, ndev, cfg,
            [&group, i](int, std::unique_ptr<Bootstrap>* b) { return group->join(i, b); },
            &impls[static_cast<size_t>(i)]);
      }
      if (r != tsrSuccess) {
        errors[static_cast<size_t>(i)] = lastErrorMessage();
        // A rank that failed before joining would leave the others waiting until their
        // deadline: join and leave at once, which fails their exchange now.
        std::unique_ptr<Bootstrap> leave;
        if (group->join(i, &leave) == tsrSuccess) leave.reset();
      }
      results[static_cast<size_t>(i)] = r;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[static_cast<size_t>(i)] != tsrSuccess) {
      // Report the first failure as this thread's error (it happened on rank i's thread).
      failWith(kLogSubsys, results[static_cast<size_t>(i)], "tsrCommInitAll: %s",
               errors[static_cast<size_t>(i)].c_str());
      return results[static_cast<size_t>(i)];
    }
  }
  out->clear();
  for (auto& impl : impls) out->push_back(CommAccess::wrap(std::move(impl)));
  return tsrSuccess;
}

tsrResult_t Communicator::split(int color, int key, const tsrConfig_t* config,
                                std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommSplit: newcomm is NULL");
  out->reset();
  ScopedRank scoped(impl_->rank());
  std::shared_ptr<CommImpl> child;
  Result r = impl_->split(color, key, config, &child);
  if (r != tsrSuccess && r != tsrInProgress) return r;
  if (child != nullptr) *out = CommAccess::wrap(std::move(child));
  return r;
}

tsrResult_t Communicator::shrink(const std::vector<int>& excluded, const tsrConfig_t* config,
                                 int flags, std::unique_ptr<Communicator>* out) {
  if (out == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommShrink: newcomm is NULL");
  out->reset();
  ScopedRank scoped(impl_->rank());
  std::shared_ptr<CommImpl> child;
  Result r = impl_->shrink(excluded, config, flags, &child);
  if (r != tsrSuccess && r != tsrInProgress) return r;
  if (child != nullptr) *out = CommAccess::wrap(std::move(child));
  return r;
}

tsrResult_t Communicator::finalize() {
  ScopedRank scoped(impl_->rank());
  return impl_->finalize();
}

tsrResult_t Communicator::abort() {
  ScopedRank scoped(impl_->rank());
  impl_->abort();
  return tsrSuccess;
}

tsrResult_t Communicator::revoke(int flags) {
  ScopedRank scoped(impl_->rank());
  return impl_->revoke(flags);
}

tsrResult_t Communicator::asyncError(tsrResult_t* error) const {
  if (error == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "tsrCommGetAsyncError: asyncError is NULL");
  *error = impl_->asyncError();
  return tsrSuccess;
}

tsrResult_t Communicator::count(int* nranks) const {
  if (nranks == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommCount: count is NULL");
  TSR_CHECK(impl_->checkReady("tsrCommCount"));
  *nranks = impl_->nranks();
  return tsrSuccess;
}

tsrResult_t Communicator::userRank(int* rank) const {
  if (rank == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommUserRank: rank is NULL");
  TSR_CHECK(impl_->checkReady("tsrCommUserRank"));
  *rank = impl_->rank();
  return tsrSuccess;
}

tsrResult_t Communicator::cuDevice(int* device) const {
  if (device == nullptr) return TSR_FAIL(tsrInvalidArgument, "tsrCommCuDevice: device is NULL");
  TSR_CHECK(impl_->checkReady("tsrCommCuDevice"));
  *device = impl_->cudaDevice();
  return tsrSuccess;
}

tsrResult_t Communicator::redOpCreatePreMulSum(tsrRedOp_t* op, const void* scalar,
                                               tsrDataType_t datatype,
                                               tsrScalarResidence_t residence) {
  ScopedRank scoped(impl_->rank());
  return impl_->redOpCreatePreMulSum(op, scalar, datatype, residence);
}

tsrResult_t Communicator::redOpDestroy(tsrRedOp_t op) {
  ScopedRank scoped(impl_->rank());
  return impl_->redOpDestroy(op);
}

}  // namespace tessera
