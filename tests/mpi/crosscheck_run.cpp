// Running one random call (or a group of them) of the cross-check: tessera on its own buffers,
// then MPI on the same inputs, then the comparison. Collectives that only move bytes are compared
// bit for bit over the whole receive buffer, guards included; reductions of integers bit for bit
// in the type (MPI reduces the same type); reductions of floats against MPI's reduction of the
// exact inputs in double, within tolerance(). MPI has no avg and no premulsum: avg is MPI's sum
// divided by the ranks (integers truncated toward zero, as NCCL), premulsum is MPI's sum of the
// inputs multiplied here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mpi/crosscheck_coll.hpp"
#include "mpi/mpi_test_util.hpp"

namespace tessera::test::crosscheck {
namespace {

constexpr size_t kGuard = 16;       // elements after each receive buffer that must not change
constexpr uint8_t kPattern = 0xa5;  // what unwritten receive bytes hold

tsrRedOp_t builtinOp(OpKind op) {
  switch (op) {
    case OpKind::kProd: return tsrProd;
    case OpKind::kMax: return tsrMax;
    case OpKind::kMin: return tsrMin;
    case OpKind::kAvg: return tsrAvg;
    default: return tsrSum;
  }
}
MPI_Op mpiOp(OpKind op) {
  switch (op) {
    case OpKind::kProd: return MPI_PROD;
    case OpKind::kMax: return MPI_MAX;
    case OpKind::kMin: return MPI_MIN;
    default: return MPI_SUM;  // sum, and the sums behind avg and premulsum
  }
}
bool sumLike(OpKind op) {
  return op == OpKind::kSum || op == OpKind::kAvg || op == OpKind::kPreMulSum;
}

// A copy of a buffer in memory from tsrMemAlloc, registered with the communicator, so that peers
// may read and write it directly (zero-copy plans); copied back and released by finish().
class Registered {
 public:
  Registered(tsrComm_t comm, std::vector<uint8_t>* buf) : comm_(comm), buf_(buf) {}
  ~Registered() { finish(); }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  std::string start() {
    if (buf_->empty()) return "";
    if (tsrMemAlloc(&mem_, buf_->size()) != tsrSuccess)
      return std::string("tsrMemAlloc failed: ") + tsrGetLastError(nullptr);
    std::memcpy(mem_, buf_->data(), buf_->size());
    if (tsrCommRegister(comm_, mem_, buf_->size(), &handle_) != tsrSuccess)
      return std::string("tsrCommRegister failed: ") + tsrGetLastError(comm_);
    return "";
  }
  // The registered address of a pointer into the buffer (NULL stays NULL).
  template <class P>
  P map(P p) const {
    auto* b = reinterpret_cast<const uint8_t*>(p);
    if (mem_ == nullptr || b < buf_->data() || b >= buf_->data() + buf_->size()) return p;
    return reinterpret_cast<P>(static_cast<uint8_t*>(mem_) + (b - buf_->data()));
  }
  void finish() {
    if (handle_ != nullptr) tsrCommDeregister(comm_, handle_);
    if (mem_ != nullptr) {
      std::memcpy(buf_->data(), mem_, buf_->size());
      tsrMemFree(mem_);
    }
    handle_ = mem_ = nullptr;
  }

 private:
  tsrComm_t comm_;
  std::vector<uint8_t>* buf_;
  void* mem_ = nullptr;
  void* handle_ = nullptr;
};

// One call on this rank, from its buffers before the call to the comparison after it. Lives
// until its group ends: tessera may read the buffers and arrays only then.
struct Pending {
  const Call* c = nullptr;
  Shape shape{};
  bool isRoot = false;
  std::vector<uint8_t> in;         // this rank's input (+1 element: MPI gets a valid pointer)
  std::vector<uint8_t> store;      // tessera's receive buffer (in place, also the input)
  std::vector<uint8_t> sendStore;  // tessera's send buffer, out of place
  std::vector<uint8_t> before;     // `store` before the call
  size_t span = 0;                 // elements of `store` between the offset and the guard
  size_t outAt = 0;                // where the output starts after the offset, in elements
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<size_t> sc, sd, rc, rd;  // alltoallv's counts and displacements
  tsrRedOp_t op = tsrSum;
  bool ownsOp = false;
  std::unique_ptr<Registered> zStore, zSend;
};

void prepare(const Call& c, int rank, Pending* p) {
  const TypeInfo& t = *c.type;
  const size_t sz = t.size, me = static_cast<size_t>(rank);
  p->c = &c;
  p->shape = shapeOf(c, rank);
  p->isRoot = rank == c.root;
  Rng data(mix64(c.dataSeed ^ (static_cast<uint64_t>(worldRank()) + 1) * 0x9e3779b1ull));
  p->in.assign((p->shape.inElems + 1) * sz, 0);
  for (size_t i = 0; i < p->shape.inElems; ++i)
    storeBits(t, p->in.data(), i, randomElement(t, c.op, data));

  // The receive buffer (in place, also the input) sits after offOut elements and before kGuard
  // elements that must keep the pattern.
  p->span = c.inPlace ? std::max(p->shape.inElems, p->shape.outElems) : p->shape.outElems;
  p->store.assign((c.offOut + p->span + kGuard) * sz, kPattern);
  uint8_t* base = p->store.data() + c.offOut * sz;
  p->recv = base;
  if (c.inPlace) {
    const size_t at = c.coll == Coll::kAllGather ? me * c.count : 0;
    std::memcpy(base + at * sz, p->in.data(), p->shape.inElems * sz);
    p->send = base + at * sz;
    if (c.coll == Coll::kReduceScatter) p->outAt = me * c.count;
    p->recv = base + p->outAt * sz;
  } else {
    p->sendStore.assign((c.offIn + p->shape.inElems + 1) * sz, 0);
    std::memcpy(p->sendStore.data() + c.offIn * sz, p->in.data(), p->shape.inElems * sz);
    p->send = p->sendStore.data() + c.offIn * sz;
    if (c.nullOthers && !p->isRoot && c.coll == Coll::kBroadcast) p->send = nullptr;
    if (c.nullOthers && !p->isRoot && c.coll == Coll::kReduce) p->recv = nullptr;
  }
  p->before = p->store;
  if (c.coll == Coll::kAllToAllv) {
    const auto n = static_cast<size_t>(c.nranks);
    p->sc.resize(n);
    p->sd.resize(n);
    p->rc.resize(n);
    p->rd.resize(n);
    for (size_t q = 0; q < n; ++q) {
      p->sc[q] = c.a2aCount[me * n + q];
      p->sd[q] = c.a2aSendDispl[me * n + q];
      p->rc[q] = c.a2aCount[q * n + me];
      p->rd[q] = c.a2aRecvDispl[q * n + me];
    }
  }
}

// Issues the call with tessera (inside a group: queues it); "" on success, else the error.
std::string issue(Pending& p, tsrComm_t comm, int rank) {
  const Call& c = *p.c;
  const tsrDataType_t dt = c.type->dt;
  p.op = builtinOp(c.op);
  if (reduces(c.coll) && c.op == OpKind::kPreMulSum) {
    uint64_t scalar = c.scalar;  // little-endian: the type's bytes come first
    if (tsrRedOpCreatePreMulSum(&p.op, &scalar, dt, tsrScalarHostImmediate, comm) != tsrSuccess)
      return std::string("tsrRedOpCreatePreMulSum failed: ") + tsrGetLastError(comm);
    p.ownsOp = true;
  }
  const void* send = p.send;
  void* recv = p.recv;
  if (c.zeroCopy) {
    p.zStore = std::make_unique<Registered>(comm, &p.store);
    p.zSend = std::make_unique<Registered>(comm, &p.sendStore);
    std::string err = p.zStore->start();
    if (err.empty()) err = p.zSend->start();
    if (!err.empty()) return err;
    send = p.zSend->map(p.zStore->map(send));
    recv = p.zStore->map(recv);
  }
  tsrResult_t res = tsrSuccess;
  switch (c.coll) {
    case Coll::kAllReduce: res = tsrAllReduce(send, recv, c.count, dt, p.op, comm, nullptr); break;
    case Coll::kReduceScatter:
      res = tsrReduceScatter(send, recv, c.count, dt, p.op, comm, nullptr);
      break;
    case Coll::kAllGather: res = tsrAllGather(send, recv, c.count, dt, comm, nullptr); break;
    case Coll::kBroadcast:
      res = tsrBroadcast(send, recv, c.count, dt, c.root, comm, nullptr);
      break;
    case Coll::kReduce:
      res = tsrReduce(send, recv, c.count, dt, p.op, c.root, comm, nullptr);
      break;
    case Coll::kAllToAll: res = tsrAlltoAll(send, recv, c.count, dt, comm, nullptr); break;
    case Coll::kAllToAllv:
      res = tsrAlltoAllv(send, p.sc.data(), p.sd.data(), recv, p.rc.data(), p.rd.data(), dt, comm,
                         nullptr);
      break;
    case Coll::kSendRecv: {
      const int next = (rank + c.shift) % c.nranks, prev = (rank - c.shift + c.nranks) % c.nranks;
      // Each rank posts its two halves in its own order (a bit of the data seed).
      const bool recvFirst = ((c.dataSeed >> (rank % 64)) & 1) != 0;
      if (recvFirst) res = tsrRecv(recv, p.shape.outElems, dt, prev, comm, nullptr);
      if (res == tsrSuccess) res = tsrSend(send, p.shape.inElems, dt, next, comm, nullptr);
      if (res == tsrSuccess && !recvFirst)
        res = tsrRecv(recv, p.shape.outElems, dt, prev, comm, nullptr);
      break;
    }
    case Coll::kNumColls: break;
  }
  if (res == tsrSuccess) return "";
  return std::string("tessera returned ") + tsrGetErrorString(res) + ": " + tsrGetLastError(comm);
}

// After the call (its group ended): releases the op, copies registered buffers back.
void settle(Pending& p, tsrComm_t comm) {
  if (p.ownsOp) tsrRedOpDestroy(p.op, comm);
  p.ownsOp = false;
  p.zStore.reset();
  p.zSend.reset();
}

// MPI's answer for a collective that only moves bytes, written into `ref` (a copy of tessera's
// receive buffer before the call, so bytes MPI leaves alone must be left alone by tessera too).
void mpiMove(const Call& c, MPI_Comm comm, int rank, const uint8_t* in, uint8_t* ref) {
  const TypeInfo& t = *c.type;
  const int cnt = static_cast<int>(c.count), n = c.nranks;
  switch (c.coll) {
    case Coll::kAllGather: MPI_Allgather(in, cnt, t.mpi, ref, cnt, t.mpi, comm); break;
    case Coll::kBroadcast:
      if (rank == c.root) std::memcpy(ref, in, c.count * t.size);
      MPI_Bcast(ref, cnt, t.mpi, c.root, comm);
      break;
    case Coll::kAllToAll: MPI_Alltoall(in, cnt, t.mpi, ref, cnt, t.mpi, comm); break;
    case Coll::kAllToAllv: {
      const auto un = static_cast<size_t>(n), me = static_cast<size_t>(rank);
      std::vector<int> sc(un), sd(un), rc(un), rd(un);
      for (size_t p = 0; p < un; ++p) {
        sc[p] = static_cast<int>(c.a2aCount[me * un + p]);
        sd[p] = static_cast<int>(c.a2aSendDispl[me * un + p]);
        rc[p] = static_cast<int>(c.a2aCount[p * un + me]);
        rd[p] = static_cast<int>(c.a2aRecvDispl[p * un + me]);
      }
      MPI_Alltoallv(in, sc.data(), sd.data(), t.mpi, ref, rc.data(), rd.data(), t.mpi, comm);
      break;
    }
    case Coll::kSendRecv: {
      const int next = (rank + c.shift) % n, prev = (rank - c.shift + n) % n;
      const Shape s = shapeOf(c, rank);
      MPI_Sendrecv(in, static_cast<int>(s.inElems), t.mpi, next, 77, ref,
                   static_cast<int>(s.outElems), t.mpi, prev, 77, comm, MPI_STATUS_IGNORE);
      break;
    }
    default: break;
  }
}

// MPI's reduction of `in` (count or nranks * count elements of MPI type `type`) into `out`.
void mpiReduce(const Call& c, MPI_Comm comm, const void* in, void* out, MPI_Datatype type,
               MPI_Op op) {
  const int cnt = static_cast<int>(c.count);
  if (c.coll == Coll::kAllReduce) MPI_Allreduce(in, out, cnt, type, op, comm);
  if (c.coll == Coll::kReduceScatter) MPI_Reduce_scatter_block(in, out, cnt, type, op, comm);
  if (c.coll == Coll::kReduce) MPI_Reduce(in, out, cnt, type, op, c.root, comm);
}

// Expected integer results: MPI's reduction in the type itself, then avg's division.
std::vector<uint8_t> intReference(const Call& c, MPI_Comm comm, const std::vector<uint8_t>& in,
                                  size_t inElems, size_t outElems) {
  const TypeInfo& t = *c.type;
  std::vector<uint8_t> contrib = in, want((outElems + 1) * t.size, 0);
  if (c.op == OpKind::kPreMulSum)
    for (size_t i = 0; i < inElems; ++i)
      storeBits(t, contrib.data(), i, loadBits(t, in.data(), i) * c.scalar);
  mpiReduce(c, comm, contrib.data(), want.data(), t.mpi, mpiOp(c.op));
  if (c.op == OpKind::kAvg)
    for (size_t i = 0; i < outElems; ++i) {
      const uint64_t b = loadBits(t, want.data(), i);
      const uint64_t q = t.kind == Kind::kSigned
                             ? static_cast<uint64_t>(signExtend(t, b) / c.nranks)
                             : b / static_cast<uint64_t>(c.nranks);
      storeBits(t, want.data(), i, q);
    }
  return want;
}

// How far tessera's float result may be from the exact one: tessera rounds once per step, in
// the type (narrow types: computed in float, rounded to the type each step), at most n + 1
// steps per element (n - 1 combinations, a pre-multiply, avg's division), each off by at most
// one unit roundoff u = 2^-p of a partial result bounded by `magnitude`; the double reference
// adds its own (n - 1) * 2^-53; results in the subnormal range round absolutely, by up to half
// the smallest subnormal per step.
double tolerance(const TypeInfo& t, int n, double magnitude) {
  const double u = std::ldexp(1.0, -t.significand());
  const double steps = std::pow(1 + u, n + 1) - 1;
  return (steps + n * 0x1p-52) * magnitude + (n + 1) * t.minSubnormal();
}

// MPI's answer (made whatever tessera did: every rank must make the same MPI calls), then the
// comparison; "" when they agree.
std::string check(const Pending& p, MPI_Comm mpi, int rank, int nranks) {
  const Call& c = *p.c;
  const TypeInfo& t = *c.type;
  const size_t sz = t.size;
  const Shape& shape = p.shape;
  const bool isRoot = p.isRoot;
  const size_t span = p.span, outAt = p.outAt;
  const std::vector<uint8_t>& in = p.in;
  const std::vector<uint8_t>& store = p.store;
  const std::vector<uint8_t>& sendStore = p.sendStore;
  const uint8_t* base = store.data() + c.offOut * sz;
  std::vector<uint8_t> ref = p.before;  // moves: the whole buffer as it must be
  std::vector<uint8_t> wantInt;         // integer reductions
  std::vector<double> wantF, magF;      // float reductions and their magnitudes
  if (!reduces(c.coll)) {
    mpiMove(c, mpi, rank, in.data(), ref.data() + c.offOut * sz);
  } else if (t.kind != Kind::kFloat) {
    wantInt = intReference(c, mpi, in, shape.inElems, shape.outElems);
  } else {
    std::vector<double> contrib(shape.inElems + 1, 0), mag(shape.inElems + 1, 0);
    const uint64_t scalarBits = c.scalar;
    const double scalar = c.op == OpKind::kPreMulSum ? decodeFloat(t, scalarBits) : 1.0;
    for (size_t i = 0; i < shape.inElems; ++i) {
      contrib[i] = toDouble(t, in.data(), i) * scalar;
      mag[i] = std::fabs(contrib[i]);
    }
    wantF.assign(shape.outElems + 1, 0);
    magF.assign(shape.outElems + 1, 0);
    mpiReduce(c, mpi, contrib.data(), wantF.data(), MPI_DOUBLE, mpiOp(c.op));
    if (sumLike(c.op)) mpiReduce(c, mpi, mag.data(), magF.data(), MPI_DOUBLE, MPI_SUM);
    if (c.op == OpKind::kAvg)
      for (size_t i = 0; i < shape.outElems; ++i) {
        wantF[i] /= nranks;
        magF[i] /= nranks;
      }
  }
  if (!c.inPlace)
    for (size_t i = 0; i < shape.inElems * sz; ++i)
      if (sendStore[c.offIn * sz + i] != in[i])
        return "the send buffer changed at element " + std::to_string(i / sz) + ": was " +
               showElement(t, in.data(), i / sz) + ", now " +
               showElement(t, sendStore.data() + c.offIn * sz, i / sz);

  // Bytes compared with `ref` bit for bit: all of them for moves and for a reduce's non-root;
  // for reductions, all but the output (compared by value below) and, in place, the input.
  const bool byValue = reduces(c.coll) && (c.coll != Coll::kReduce || isRoot);
  size_t skipFrom = 0, skipTo = 0;  // in elements of the receive buffer
  if (byValue) {
    skipFrom = c.inPlace ? 0 : outAt;
    skipTo = c.inPlace ? span : outAt + shape.outElems;
  }
  for (size_t b = 0; b < store.size(); ++b) {
    const size_t e = b / sz;
    if (e >= c.offOut + skipFrom && e < c.offOut + skipTo) continue;
    if (store[b] == ref[b]) continue;
    const long rel = static_cast<long>(e) - static_cast<long>(c.offOut);
    const bool inOutput = rel >= 0 && static_cast<size_t>(rel) < span;
    return std::string(inOutput ? "" : "outside the output: ") + "receive buffer element " +
           std::to_string(rel) + " (of " + std::to_string(span) + "): expected " +
           showElement(t, ref.data(), e) + ", got " + showElement(t, store.data(), e);
  }
  if (!byValue) return "";

  const uint8_t* got = base + outAt * sz;
  for (size_t i = 0; i < shape.outElems; ++i) {
    if (t.kind != Kind::kFloat) {
      if (loadBits(t, got, i) != loadBits(t, wantInt.data(), i))
        return "element " + std::to_string(i) + ": expected " + showElement(t, wantInt.data(), i) +
               " (MPI), got " + showElement(t, got, i);
      continue;
    }
    const double have = toDouble(t, got, i), want = wantF[i];
    double tol = 0;  // max and min pick one of the inputs: exact
    if (sumLike(c.op)) tol = tolerance(t, nranks, magF[i]);
    if (c.op == OpKind::kProd) tol = tolerance(t, nranks, std::fabs(want));
    if (!(std::fabs(have - want) <= tol)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "expected %.17g (MPI, in double), tolerance %.3g", want, tol);
      return "element " + std::to_string(i) + ": got " + showElement(t, got, i) + ", " + buf;
    }
  }
  return "";
}

}  // namespace

std::string runCalls(const std::vector<Call>& calls, tsrComm_t comm, MPI_Comm mpi, int rank,
                     int nranks) {
  std::vector<std::unique_ptr<Pending>> pending;
  for (const Call& c : calls) {
    pending.push_back(std::make_unique<Pending>());
    prepare(c, rank, pending.back().get());
  }
  const bool grouped = calls.size() > 1 || calls[0].grouped;
  std::string failed;
  if (grouped && tsrGroupStart() != tsrSuccess)
    failed = std::string("tsrGroupStart failed: ") + tsrGetLastError(nullptr);
  for (size_t k = 0; k < pending.size() && failed.empty(); ++k) {
    failed = issue(*pending[k], comm, rank);
    if (!failed.empty() && calls.size() > 1) failed = "call [" + std::to_string(k) + "]: " + failed;
  }
  if (grouped) {
    // Ends the group even after a failed call, so that this thread has none open.
    const tsrResult_t end = tsrGroupEnd();
    if (failed.empty() && end != tsrSuccess)
      failed = std::string("tsrGroupEnd returned ") + tsrGetErrorString(end) + ": " +
               tsrGetLastError(comm);
  }
  for (auto& p : pending) settle(*p, comm);
  std::string bad;
  for (size_t k = 0; k < pending.size(); ++k) {
    std::string b = check(*pending[k], mpi, rank, nranks);
    if (bad.empty() && !b.empty())
      bad = (calls.size() > 1 ? "call [" + std::to_string(k) + "]: " : std::string()) + b;
  }
  return failed.empty() ? bad : failed;
}

}  // namespace tessera::test::crosscheck
