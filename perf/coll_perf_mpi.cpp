#include "coll_perf_mpi.hpp"

#include <climits>

namespace tessera::perf {

#if TESSERA_HAVE_MPI

namespace {

bool mpiTypeOf(tsrDataType_t t, MPI_Datatype* out) {
  switch (t) {
    case tsrInt8: *out = MPI_INT8_T; return true;
    case tsrUint8: *out = MPI_UINT8_T; return true;
    case tsrInt32: *out = MPI_INT32_T; return true;
    case tsrUint32: *out = MPI_UINT32_T; return true;
    case tsrInt64: *out = MPI_INT64_T; return true;
    case tsrUint64: *out = MPI_UINT64_T; return true;
    case tsrFloat32: *out = MPI_FLOAT; return true;
    case tsrFloat64: *out = MPI_DOUBLE; return true;
    default: return false;  // MPI has no half, bfloat16 or FP8
  }
}

MPI_Op mpiOpOf(OpKind op) {
  switch (op) {
    case OpKind::kProd: return MPI_PROD;
    case OpKind::kMin: return MPI_MIN;
    case OpKind::kMax: return MPI_MAX;
    default: return MPI_SUM;  // sum, and the stand-in for avg and premulsum
  }
}

// MPI broadcasts in place: the root sends from the receive buffer, which the timing does not mind
// (the check runs tessera only).
int mpiRun(MpiColl c, const MpiArgs& m) {
  switch (c) {
    case MpiColl::kAllreduce: return MPI_Allreduce(m.send, m.recv, m.count, m.type, m.op, m.comm);
    case MpiColl::kAllgather:
      return MPI_Allgather(m.send, m.count, m.type, m.recv, m.count, m.type, m.comm);
    case MpiColl::kReduceScatterBlock:
      return MPI_Reduce_scatter_block(m.send, m.recv, m.count, m.type, m.op, m.comm);
    case MpiColl::kBcast: return MPI_Bcast(m.recv, m.count, m.type, m.root, m.comm);
    case MpiColl::kReduce: return MPI_Reduce(m.send, m.recv, m.count, m.type, m.op, m.root, m.comm);
    case MpiColl::kAlltoall:
      return MPI_Alltoall(m.send, m.count, m.type, m.recv, m.count, m.type, m.comm);
    case MpiColl::kSendrecvRing:
      return MPI_Sendrecv(m.send, m.count, m.type, (m.rank + 1) % m.nranks, 0, m.recv, m.count,
                          m.type, (m.rank + m.nranks - 1) % m.nranks, 0, m.comm, MPI_STATUS_IGNORE);
    case MpiColl::kNone: break;
  }
  return MPI_ERR_OTHER;
}

}  // namespace

bool mpiBaselineSupported(const CollHooks& hooks, const CollArgs& args, OpKind op,
                          std::string* whyNot, std::string* note) {
  MPI_Datatype t;
  if (hooks.mpi == MpiColl::kNone) {
    *whyNot = "no MPI call for this collective";
    return false;
  }
  if (!mpiTypeOf(args.dtype, &t)) {
    *whyNot = std::string("MPI has no ") + typeName(args.dtype);
    return false;
  }
  if (args.count > static_cast<size_t>(INT_MAX)) {
    *whyNot = "counts above INT_MAX do not fit MPI's int";
    return false;
  }
  if (hooks.reduces && (op == OpKind::kAvg || op == OpKind::kPreMulSum))
    *note = std::string("MPI has no ") + opKindName(op) + ": its column times MPI_SUM";
  return true;
}

std::string mpiBaselineRun(const CollHooks& hooks, const CollArgs& args, OpKind op) {
  if (args.count > static_cast<size_t>(INT_MAX)) return "count exceeds MPI's int";
  MpiArgs m;
  m.send = args.send;
  m.recv = args.recv;
  m.count = static_cast<int>(args.count);
  mpiTypeOf(args.dtype, &m.type);
  m.op = mpiOpOf(op);
  m.root = args.root;
  m.rank = args.rank;
  m.nranks = args.nranks;
  m.comm = MPI_COMM_WORLD;
  int rc = mpiRun(hooks.mpi, m);
  if (rc == MPI_SUCCESS) return "";
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string("MPI error: ") + text;
}

std::string mpiLibraryText() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  size_t end = s.find_first_of(",\n");  // Open MPI appends the package and the date
  return end == std::string::npos ? s : s.substr(0, end);
}

#else  // no MPI in this build

bool mpiBaselineSupported(const CollHooks&, const CollArgs&, OpKind, std::string* whyNot,
                          std::string*) {
  *whyNot = "this build has no MPI";
  return false;
}

std::string mpiBaselineRun(const CollHooks&, const CollArgs&, OpKind) {
  return "this build has no MPI";
}

std::string mpiLibraryText() { return ""; }

#endif

}  // namespace tessera::perf
