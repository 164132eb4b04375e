#include "coll_perf_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "coll_perf_data.hpp"
#include "coll_perf_mpi.hpp"
#include "core/datatype.hpp"
#include "perf_util.hpp"

namespace tessera::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Blocks of the interleaved baseline: tessera and MPI take turns block by block (the order
// alternating too), so both see the same machine; more blocks would add barriers, fewer would
// let a burst of noise land on one of them only.
constexpr int kBaselineBlocks = 4;

tsrRedOp_t builtinOp(OpKind k) {
  switch (k) {
    case OpKind::kProd: return tsrProd;
    case OpKind::kMax: return tsrMax;
    case OpKind::kMin: return tsrMin;
    case OpKind::kAvg: return tsrAvg;
    default: return tsrSum;
  }
}

class RankRunner {
 public:
  RankRunner(Shared& s, int thread)
      : s_(s),
        o_(s.o),
        h_(s.hooks),
        thread_(thread),
        rank_(s.world.proc * s.world.threads + thread),
        nranks_(s.world.nranks()),
        comm_(s.comms[static_cast<size_t>(thread)]),
        stream_(s.streams[static_cast<size_t>(thread)]) {}

  void run() {
    std::string e = bufs_.allocate(comm_, s_.bufferBytes, o_.device, o_.registerBuffers, stream_);
    if (!e.empty()) fail(tsrInvalidUsage, e);
    if (agreeOnErrors()) return;
    for (tsrDataType_t type : o_.types)
      for (OpKind op : o_.ops)
        if (!runTypeOp(type, op)) return;
  }

 private:
  bool runTypeOp(tsrDataType_t type, OpKind op) {
    tsrRedOp_t redop = builtinOp(op);
    bool created = false;
    if (h_.reduces && op == OpKind::kPreMulSum) {
      unsigned char scalar[8] = {};
      preMulScalar(type, scalar);
      if (tsrRedOpCreatePreMulSum(&redop, scalar, type, tsrScalarHostImmediate, comm_) !=
          tsrSuccess)
        fail(tsrInvalidUsage, std::string("tsrRedOpCreatePreMulSum: ") + tsrGetLastError(comm_));
      else
        created = true;
    }
    bool ok = !agreeOnErrors();
    std::vector<int> roots;
    if (h_.rooted && o_.root < 0)
      for (int r = 0; r < nranks_; ++r) roots.push_back(r);
    else
      roots.push_back(h_.rooted ? o_.root : 0);
    for (int root : roots) {
      for (uint64_t size : sweepSizes(o_)) {
        if (!ok) break;
        ok = runSize(type, op, redop, root, size);
      }
    }
    if (created) tsrRedOpDestroy(redop, comm_);
    return ok;
  }

  bool runSize(tsrDataType_t type, OpKind op, tsrRedOp_t redop, int root, uint64_t size) {
    size_t elt = dtypeSize(type);
    CollSizes cs;
    h_.sizes(static_cast<size_t>(size / elt), elt, nranks_, &cs);
    Row row;
    row.size = std::max(cs.sendCount, cs.recvCount) * elt;
    row.count = cs.paramCount;
    row.type = type;
    row.redop = h_.reduces ? opKindName(op) : "none";
    row.root = h_.rooted ? root : -1;
    CollArgs a;
    a.comm = comm_;
    a.rank = rank_;
    a.nranks = nranks_;
    a.root = root;
    a.dtype = type;
    a.op = redop;
    a.count = cs.paramCount;
    a.stream = static_cast<tsrStream_t>(stream_);
    row.outOfPlace = runVariant(a, cs, op, false, &row);
    if (agreeOnErrors()) return false;
    if (h_.hasInPlace) {
      row.inPlace = runVariant(a, cs, op, true, nullptr);
      if (agreeOnErrors()) return false;
    }
    if (rank_ == 0) {
      printRow(row, o_.baseline());
      for (const VariantResult* v : {&row.outOfPlace, &row.inPlace}) {
        if (!v->ran) continue;
        s_.busbwSum += v->busbw;
        ++s_.busbwCount;
        if (v->wrong > 0) s_.wrong += v->wrong;
      }
      s_.rows.push_back(row);
    }
    return true;
  }

  // Times one variant (and MPI beside it when `row` is given and the baseline is on), then checks
  // it. Every rank goes through the same group calls whatever fails.
  VariantResult runVariant(CollArgs a, const CollSizes& cs, OpKind op, bool inPlace, Row* row) {
    size_t elt = dtypeSize(a.dtype);
    auto* base = static_cast<unsigned char*>(inPlace ? bufs_.recv() : bufs_.send());
    auto r = static_cast<size_t>(rank_);
    a.send = base + (inPlace ? cs.sendInPlaceOffset * r * elt : 0);
    a.recv =
        static_cast<unsigned char*>(bufs_.recv()) + (inPlace ? cs.recvInPlaceOffset * r * elt : 0);
    fillInputs(a, cs, op, inPlace);

    std::string whyNot, note;
    bool baseline =
        row != nullptr &&
        (o_.memcpyBaseline || (o_.mpiBaseline && mpiBaselineSupported(h_, a, op, &whyNot, &note)));
    copyBytes_ = std::min(cs.sendCount, cs.recvCount) * elt;
    if (row != nullptr && o_.mpiBaseline && rank_ == 0) {
      std::string text = baseline ? note : "not run: " + whyNot;
      if (!text.empty() && !noted(text))
        printNote("mpi baseline, " + std::string(typeName(a.dtype)) + " " +
                  (h_.reduces ? opKindName(op) : "") + ": " + text);
    }

    s_.group.barrier(thread_);
    for (int i = 0; i < o_.warmup; ++i) call(a);
    if (o_.graphLaunches > 0 && o_.warmup == 0) call(a);  // plans are bound outside the capture
    waitStream();
    if (baseline)
      for (int i = 0; i < o_.warmup; ++i) callMpi(a, op);
    double tessUs = 0, mpiUs = 0;
    if (baseline) {
      int blocks = std::min(o_.iters, kBaselineBlocks);
      for (int b = 0; b < blocks; ++b) {
        int n = o_.iters / blocks + (b < o_.iters % blocks ? 1 : 0);
        for (int turn = 0; turn < 2; ++turn) {
          bool mpiTurn = (turn == 0) == (b % 2 == 1);
          s_.group.barrier(thread_);
          auto t0 = Clock::now();
          for (int i = 0; i < n; ++i) mpiTurn ? callMpi(a, op) : call(a);
          if (!mpiTurn) waitStream();
          (mpiTurn ? mpiUs : tessUs) += usSince(t0);
        }
      }
    } else if (o_.graphLaunches > 0) {
      tessUs = timeGraph(a);
    } else {
      s_.group.barrier(thread_);
      auto t0 = Clock::now();
      for (int i = 0; i < o_.iters; ++i) call(a);
      waitStream();  // device calls: the time is until they are done, not enqueued
      tessUs = usSince(t0);
    }
    VariantResult v;
    v.ran = true;
    double bytes = static_cast<double>(std::max(cs.sendCount, cs.recvCount) * elt);
    const int calls = o_.iters * std::max(1, o_.graphLaunches);
    v.timeUs = combine(tessUs / calls);
    v.algbw = v.timeUs > 0 ? bytes / v.timeUs / 1e3 : 0;
    v.busbw = v.algbw * h_.busFactor(nranks_);
    if (baseline) {
      row->mpiRan = true;
      row->mpiTimeUs = combine(mpiUs / o_.iters);
      // memcpy: its own bandwidth (bytes copied per second), the yardstick the busbw is held to.
      row->mpiBusbw = row->mpiTimeUs <= 0 ? 0
                      : o_.memcpyBaseline ? static_cast<double>(copyBytes_) / row->mpiTimeUs / 1e3
                                          : bytes / row->mpiTimeUs / 1e3 * h_.busFactor(nranks_);
    }
    if (o_.check) v.wrong = check(a, cs, op, inPlace);
    return v;
  }

  void fillInputs(const CollArgs& a, const CollSizes& cs, OpKind op, bool inPlace) {
    size_t elt = dtypeSize(a.dtype);
    auto fill = [&](void* dst, size_t count, bool input) {
      std::string e = bufs_.fillRegion(dst, count * elt, [&](void* host) {
        if (input)
          fillInput(host, count, a.dtype, op, h_.reduces, rank_);
        else
          fillValue(host, count, a.dtype, kSentinel);
      });
      if (!e.empty()) fail(tsrUnhandledCudaError, e);
    };
    // The output first, so elements nobody writes stay wrong; in place the sentinel covers the
    // whole shared buffer (the output may start inside it: reduce_scatter), then the input is
    // written into it.
    if (inPlace)
      fill(bufs_.recv(), std::max(cs.sendCount, cs.recvCount), false);
    else
      fill(a.recv, cs.recvCount, false);
    fill(const_cast<void*>(a.send), cs.sendCount, true);
  }

  int64_t check(const CollArgs& a, const CollSizes& cs, OpKind op, bool inPlace) {
    fillInputs(a, cs, op, inPlace);
    s_.group.barrier(thread_);
    call(a);
    waitStream();
    s_.group.barrier(thread_);
    int64_t wrong = 0;
    if (!failed_) {
      const void* view = nullptr;
      std::string e = bufs_.viewRegion(a.recv, cs.recvCount * dtypeSize(a.dtype), &view);
      if (!e.empty())
        fail(tsrUnhandledCudaError, e);
      else
        wrong = countWrong(view, cs.recvCount, h_, a, op);
    }
    return static_cast<int64_t>(s_.group.sum(thread_, static_cast<double>(wrong)));
  }

  void call(const CollArgs& a) {
    if (failed_) return;  // the peers' calls fail or time out too; the group calls still match
    tsrResult_t r = h_.run(a);
    if (r != tsrSuccess)
      fail(r, std::string(h_.name) + ": " + tsrGetErrorString(r) + ": " + tsrGetLastError(comm_));
  }

  // -m device: waits for this rank's stream (its calls' completion); nothing with host buffers.
  void waitStream() {
    if (stream_ == nullptr || failed_) return;
    std::string e = cudaStreamWait(stream_);
    if (!e.empty()) fail(tsrUnhandledCudaError, e);
  }

  // -G: the -n calls captured in one graph per rank, launched -G times (after one untimed launch);
  // returns the time of the timed launches. Every rank makes the same group calls whatever fails.
  double timeGraph(const CollArgs& a) {
    void* exec = nullptr;
    if (!failed_) {
      std::string e = cudaGraphRecord(
          stream_,
          [&] {
            for (int i = 0; i < o_.iters; ++i) call(a);
          },
          &exec);
      if (e.empty()) e = cudaGraphRun(exec, stream_);
      if (!e.empty()) fail(tsrUnhandledCudaError, "-G: " + e);
      waitStream();
    }
    s_.group.barrier(thread_);
    auto t0 = Clock::now();
    for (int l = 0; l < o_.graphLaunches && !failed_; ++l) {
      std::string e = cudaGraphRun(exec, stream_);
      if (!e.empty()) fail(tsrUnhandledCudaError, "-G: " + e);
    }
    waitStream();
    double us = usSince(t0);
    cudaGraphFree(exec);
    return us;
  }

  void callMpi(const CollArgs& a, OpKind op) {
    if (failed_) return;
    if (o_.memcpyBaseline) {
      std::memcpy(a.recv, a.send, copyBytes_);
      return;
    }
    std::string e = mpiBaselineRun(h_, a, op);
    if (!e.empty()) fail(tsrSystemError, e);
  }

  void fail(tsrResult_t code, const std::string& why) {
    if (failed_) return;
    failed_ = true;
    code_ = code;
    why_ = why;
  }

  // Every rank learns whether any rank failed; the first to say why prints it. The exit status
  // is 2 when the library refused the run as invalid usage (e.g. device buffers before the
  // device executor exists), 1 otherwise.
  bool agreeOnErrors() {
    double worst = s_.group.max(thread_, failed_ ? static_cast<double>(code_) : 0.0);
    if (worst == 0) return false;
    double rank0 = s_.group.fromRank0(thread_, failed_ ? 1.0 : 0.0);
    if (failed_ && (rank_ == 0 || rank0 == 0))
      std::fprintf(rank_ == 0 ? stdout : stderr, "# ERROR rank %d: %s\n", rank_, why_.c_str());
    if (rank_ == 0) {
      s_.status = static_cast<tsrResult_t>(worst) == tsrInvalidUsage ? 2 : 1;
      std::fflush(stdout);
    }
    return true;
  }

  double combine(double us) {
    switch (o_.average) {
      case Average::kRank0: return s_.group.fromRank0(thread_, us);
      case Average::kMin: return s_.group.min(thread_, us);
      case Average::kMax: return s_.group.max(thread_, us);
      default: return s_.group.sum(thread_, us) / nranks_;
    }
  }

  // Notes are printed once per distinct text.
  bool noted(const std::string& text) {
    if (std::find(notes_.begin(), notes_.end(), text) != notes_.end()) return true;
    notes_.push_back(text);
    return false;
  }

  Shared& s_;
  const Options& o_;
  const CollHooks& h_;
  int thread_;
  int rank_;
  int nranks_;
  tsrComm_t comm_;
  void* stream_;  // -m device: this rank's CUDA stream; else null
  RankBuffers bufs_;
  bool failed_ = false;
  size_t copyBytes_ = 0;  // --baseline memcpy: bytes each rank copies
  tsrResult_t code_ = tsrSuccess;
  std::string why_;
  std::vector<std::string> notes_;
};

}  // namespace

void runRank(Shared& s, int thread) { RankRunner(s, thread).run(); }

size_t largestBufferBytes(const Options& o, const CollHooks& hooks, int nranks) {
  size_t most = 0;
  for (tsrDataType_t t : o.types) {
    size_t elt = dtypeSize(t);
    for (uint64_t size : sweepSizes(o)) {
      CollSizes cs;
      hooks.sizes(static_cast<size_t>(size / elt), elt, nranks, &cs);
      most = std::max(most, std::max(cs.sendCount, cs.recvCount) * elt);
    }
  }
  return most;
}

}  // namespace tessera::perf
