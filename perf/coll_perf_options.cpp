#include "coll_perf_options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/datatype.hpp"
#include "perf_util.hpp"

namespace tessera::perf {
namespace {

[[noreturn]] void usage(const CollHooks& h, const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "%s_perf: %s\n", h.name, why.c_str());
  std::fprintf(
      stderr,
      "usage: %s_perf [options]   (nccl-tests' flags; ranks are threads and/or MPI processes)\n"
      "  -b, --minbytes <n>      smallest size (32M); K, M, G suffixes\n"
      "  -e, --maxbytes <n>      largest size (32M)\n"
      "  -i, --stepbytes <n>     size increment when -f is 1 (1M)\n"
      "  -f, --stepfactor <x>    size multiplier (1: use -i)\n"
      "  -n, --iters <n>         timed iterations per size (20)\n"
      "  -w, --warmup_iters <n>  untimed iterations before them (5)\n"
      "  -c, --check <0/1>       check the results (1)\n"
      "  -o, --op <op>           sum, prod, min, max, avg, premulsum or all (sum)\n"
      "  -d, --datatype <type>   int8, uint8, int32, uint32, int64, uint64, half, float, double,\n"
      "                          bfloat16, f8e4m3, f8e5m2 or all (float)\n"
      "  -r, --root <rank>       root of broadcast/reduce; -1: every root in turn (0)\n"
      "  -t, --nthreads <n>      ranks as threads per process (1)\n"
      "  -g, --ngpus <n>         accepted for nccl-tests scripts; must be 1\n"
      "  -a, --average <0-3>     time over ranks: 0 rank 0, 1 mean, 2 min, 3 max (1)\n"
      "  -J, --json <file>       also write the rows as JSON\n"
      "  -m, --memory <kind>     host or device buffers (host)\n"
      "  -R, --register <0/1>    register the buffers (0): host ones tsrMemAlloc'ed and\n"
      "                          tsrCommRegister'ed; device ones made windows\n"
      "                          (tsrCommWindowRegister: zero-copy device calls)\n"
      "  -A, --algo <families>   TESSERA_ALGO for the run, e.g. ring\n"
      "  -G, --cudagraph <n>     -m device: capture the -n calls in a CUDA graph per rank and\n"
      "                          launch it n times (0: eager calls)\n"
      "      --plan <file>       verify a plan file (tessera_plan JSON) and run it for every call\n"
      "      --baseline mpi      time MPI's own collective beside tessera's (MPI processes)\n"
      "      --baseline memcpy   time a memcpy of the same bytes (send -> recv) on every rank\n",
      h.name);
  std::exit(2);
}

bool parseInt(const char* text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < -1000000000L || v > 1000000000L) return false;
  *out = static_cast<int>(v);
  return true;
}

struct TypeName {
  const char* name;
  tsrDataType_t type;
};
constexpr TypeName kTypes[] = {
    {"int8", tsrInt8},         {"uint8", tsrUint8},       {"int32", tsrInt32},
    {"uint32", tsrUint32},     {"int64", tsrInt64},       {"uint64", tsrUint64},
    {"half", tsrFloat16},      {"float", tsrFloat32},     {"double", tsrFloat64},
    {"bfloat16", tsrBfloat16}, {"f8e4m3", tsrFloat8e4m3}, {"f8e5m2", tsrFloat8e5m2},
};

struct OpName {
  const char* name;
  OpKind kind;
};
constexpr OpName kOps[] = {{"sum", OpKind::kSum}, {"prod", OpKind::kProd},
                           {"max", OpKind::kMax}, {"min", OpKind::kMin},
                           {"avg", OpKind::kAvg}, {"premulsum", OpKind::kPreMulSum}};

// The long option of each short one, so both spellings take the same path.
struct Flag {
  const char* longName;
  char shortName;
};
constexpr Flag kFlags[] = {
    {"minbytes", 'b'}, {"maxbytes", 'e'},     {"stepbytes", 'i'}, {"stepfactor", 'f'},
    {"iters", 'n'},    {"warmup_iters", 'w'}, {"check", 'c'},     {"op", 'o'},
    {"datatype", 'd'}, {"root", 'r'},         {"nthreads", 't'},  {"ngpus", 'g'},
    {"average", 'a'},  {"json", 'J'},         {"memory", 'm'},    {"register", 'R'},
    {"algo", 'A'},     {"plan", 'P'},         {"baseline", 'B'},  {"cudagraph", 'G'},
};

}  // namespace

const char* typeName(tsrDataType_t t) {
  for (const TypeName& n : kTypes)
    if (n.type == t) return n.name;
  return "invalid";
}

const char* opKindName(OpKind k) {
  for (const OpName& n : kOps)
    if (n.kind == k) return n.name;
  return "invalid";
}

Options parseOptions(int argc, char** argv, const CollHooks& h) {
  Options o;
  bool sawFactor = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    char flag = 0;
    const char* inlineValue = nullptr;  // "-b8" or "--minbytes=8"
    if (a == "-h" || a == "--help") usage(h, "");
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inlineValue = argv[i] + 2 + eq + 1;
        name.resize(eq);
      }
      for (const Flag& f : kFlags)
        if (name == f.longName) flag = f.shortName;
    } else if (a.size() >= 2 && a[0] == '-') {
      for (const Flag& f : kFlags)
        if (a[1] == f.shortName && f.shortName != 'P' && f.shortName != 'B') flag = f.shortName;
      if (a.size() > 2) inlineValue = argv[i] + 2;
    }
    if (flag == 0) usage(h, "unknown option " + a);
    const char* v = inlineValue;
    if (v == nullptr) {
      if (i + 1 >= argc) usage(h, a + " needs a value");
      v = argv[++i];
    }
    auto bad = [&]() { usage(h, "bad value '" + std::string(v) + "' for " + a); };
    int n = 0;
    switch (flag) {
      case 'b':
        if (!parseByteSize(v, &o.minBytes)) bad();
        break;
      case 'e':
        if (!parseByteSize(v, &o.maxBytes)) bad();
        break;
      case 'i':
        if (!parseByteSize(v, &o.stepBytes)) bad();
        break;
      case 'f':
        o.stepFactor = std::atof(v);
        sawFactor = true;
        break;
      case 'n':
        if (!parseInt(v, &o.iters) || o.iters < 1) bad();
        break;
      case 'w':
        if (!parseInt(v, &o.warmup) || o.warmup < 0) bad();
        break;
      case 'c':
        if (!parseInt(v, &n) || n < 0 || n > 1) bad();
        o.check = n == 1;
        break;
      case 'o':
        o.ops.clear();
        for (const OpName& op : kOps)
          if (std::strcmp(v, "all") == 0 || std::strcmp(v, op.name) == 0) o.ops.push_back(op.kind);
        if (std::strcmp(v, "mulsum") == 0) o.ops.push_back(OpKind::kPreMulSum);  // nccl-tests' name
        if (o.ops.empty()) bad();
        break;
      case 'd': {
        o.types.clear();
        for (const TypeName& t : kTypes)
          if (std::strcmp(v, "all") == 0 || std::strcmp(v, t.name) == 0) o.types.push_back(t.type);
        tsrDataType_t t;
        if (o.types.empty() && dtypeParse(v, &t) == tsrSuccess) o.types.push_back(t);
        if (o.types.empty()) bad();
        break;
      }
      case 'r':
        if (!parseInt(v, &o.root) || o.root < -1) bad();
        break;
      case 't':
        if (!parseInt(v, &o.threads) || o.threads < 1 || o.threads > 1024) bad();
        break;
      case 'g':
        if (!parseInt(v, &n) || n != 1)
          usage(h, "-g: tessera's ranks are threads (-t) and processes (mpirun); -g must be 1");
        break;
      case 'a':
        if (!parseInt(v, &n) || n < 0 || n > 3) bad();
        o.average = static_cast<Average>(n);
        break;
      case 'J': o.jsonPath = v; break;
      case 'm':
        if (std::strcmp(v, "host") != 0 && std::strcmp(v, "device") != 0) bad();
        o.device = std::strcmp(v, "device") == 0;
        break;
      case 'R':
        if (!parseInt(v, &n) || n < 0 || n > 1) bad();
        o.registerBuffers = n == 1;
        break;
      case 'A':
        if (*v == '\0') bad();
        o.algo = v;
        break;
      case 'P': o.planPath = v; break;
      case 'G':
        if (!parseInt(v, &n) || n < 0 || n > 100000) bad();
        o.graphLaunches = n;
        break;
      case 'B':
        if (std::strcmp(v, "mpi") == 0)
          o.mpiBaseline = true;
        else if (std::strcmp(v, "memcpy") == 0)
          o.memcpyBaseline = true;
        else
          usage(h, "--baseline: mpi or memcpy");
        break;
      default: usage(h, "unknown option " + a);
    }
  }
  if (o.minBytes > o.maxBytes) usage(h, "-b must not exceed -e");
  if (sawFactor && !(o.stepFactor >= 1)) usage(h, "-f must be at least 1");
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes)
    usage(h, "-i must be positive when -f is 1");
  if (!o.algo.empty() && !o.planPath.empty()) usage(h, "-A and --plan exclude each other");
  if (o.graphLaunches > 0 && !o.device)
    usage(h, "-G captures calls on a CUDA stream: it needs -m device (host calls ignore streams)");
  if (o.memcpyBaseline && o.device)
    usage(h, "--baseline memcpy copies with the CPU: it needs -m host");
  if (o.mpiBaseline && o.threads != 1)
    usage(h, "--baseline mpi runs one rank per MPI process: drop -t");
  // nccl-tests ignores -o and -r where they mean nothing; so do we (one pass, printed "none"
  // and -1).
  if (!h.reduces) o.ops = {OpKind::kSum};
  if (!h.rooted) o.root = 0;
  return o;
}

std::vector<uint64_t> sweepSizes(const Options& o) {
  std::vector<uint64_t> out;
  if (o.stepFactor > 1) {
    for (double s = static_cast<double>(o.minBytes);
         s <= static_cast<double>(o.maxBytes) * (1 + 1e-12); s *= o.stepFactor) {
      auto b = static_cast<uint64_t>(std::llround(s));
      if (out.empty() || out.back() != b) out.push_back(b);
      if (s == 0) break;  // -b 0: one row of zero bytes
    }
  } else {
    for (uint64_t s = o.minBytes; s <= o.maxBytes; s += o.stepBytes) {
      out.push_back(s);
      if (o.stepBytes == 0) break;
    }
  }
  return out;
}

}  // namespace tessera::perf
