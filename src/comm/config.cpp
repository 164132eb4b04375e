#include "comm/config.hpp"

#include <strings.h>

#include <cstddef>
#include <cstdint>

#include "core/env.hpp"
#include "transport/transport.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kInit;

Result intField(int userValue, const char* field, const char* envName, int inherited,
                bool haveInherit, int lo, int hi, int* out) {
  if (userValue != TSR_CONFIG_UNDEF_INT) {
    if (userValue < lo || userValue > hi)
      return TSR_FAIL(tsrInvalidArgument, "tsrConfig_t.%s = %d is out of range [%d, %d]", field,
                      userValue, lo, hi);
    *out = userValue;
    return tsrSuccess;
  }
  if (haveInherit) {
    *out = inherited;
    return tsrSuccess;
  }
  int64_t v = 0;
  TSR_CHECK(envInt(envName, &v));
  *out = static_cast<int>(v);
  return tsrSuccess;
}

}  // namespace

Result resolveConfig(const tsrConfig_t* user, const CommConfig* inherit, CommConfig* out) {
  tsrConfig_t undef = TSR_CONFIG_INITIALIZER;
  const tsrConfig_t* c = user != nullptr ? user : &undef;
  if (c->magic != TSR_CONFIG_MAGIC)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrConfig_t has magic 0x%x, expected 0x%x: initialize it with "
                    "TSR_CONFIG_INITIALIZER",
                    c->magic, TSR_CONFIG_MAGIC);
  if (c->size < offsetof(tsrConfig_t, device) + sizeof(int) || c->size > sizeof(tsrConfig_t) * 4)
    return TSR_FAIL(tsrInvalidArgument, "tsrConfig_t.size = %zu is not a size this library knows",
                    c->size);
  if (c->version > TESSERA_VERSION_CODE)
    TSR_WARN(
        "tsrConfig_t was built against tessera %u, newer than this library (%d); fields it "
        "added are ignored",
        c->version, TESSERA_VERSION_CODE);

  const bool inh = inherit != nullptr;
  CommConfig base = inh ? *inherit : CommConfig{};
  int blocking = 1, splitShare = 0;
  TSR_CHECK(intField(c->blocking, "blocking", "TESSERA_COMM_BLOCKING", base.blocking, inh, 0, 1,
                     &blocking));
  TSR_CHECK(intField(c->splitShare, "splitShare", "TESSERA_SPLIT_SHARE", base.splitShare, inh, 0, 1,
                     &splitShare));
  TSR_CHECK(
      intField(c->minCTAs, "minCTAs", "TESSERA_MIN_CTAS", base.minCTAs, inh, 1, 64, &out->minCTAs));
  TSR_CHECK(
      intField(c->maxCTAs, "maxCTAs", "TESSERA_MAX_CTAS", base.maxCTAs, inh, 1, 64, &out->maxCTAs));
  if (out->minCTAs > out->maxCTAs)
    return TSR_FAIL(tsrInvalidArgument, "minCTAs (%d) is larger than maxCTAs (%d)", out->minCTAs,
                    out->maxCTAs);
  out->blocking = blocking != 0;
  // A split child always gets resources of its own: accepting 1 would promise a sharing that
  // never happens.
  if (splitShare != 0)
    return TSR_FAIL(tsrInvalidArgument,
                    "tsrConfig_t.splitShare = 1 (or TESSERA_SPLIT_SHARE=1) is not supported: a "
                    "split child never shares its parent's resources in this version; pass 0 or "
                    "leave it undefined");
  out->splitShare = false;

  if (c->cgaClusterSize != TSR_CONFIG_UNDEF_INT) {
    if (c->cgaClusterSize < 0 || c->cgaClusterSize > 8)
      return TSR_FAIL(tsrInvalidArgument, "tsrConfig_t.cgaClusterSize = %d is out of range [0, 8]",
                      c->cgaClusterSize);
    // The kernels launch without thread-block clusters; a cluster of one CTA is the same thing.
    if (c->cgaClusterSize > 1)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrConfig_t.cgaClusterSize = %d is not supported: tessera's kernels launch "
                      "without thread-block clusters (pass 0 or 1, or leave it undefined)",
                      c->cgaClusterSize);
    out->cgaClusterSize = c->cgaClusterSize;
  } else {
    out->cgaClusterSize = base.cgaClusterSize;
  }

  if (c->netName != nullptr) {
    // Ranks on different hosts always talk over the ucx transport, so "UCX" is the one network
    // a caller can name truthfully; anything else (NCCL's "Socket" or "IB" included) must not
    // silently run over UCX instead.
    std::string whyNot;
    const bool haveUcx = transportBuilt(TransportKind::kUcx, &whyNot);
    if (strcasecmp(c->netName, "UCX") != 0 || !haveUcx)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrConfig_t.netName = \"%s\" is not a network this build has: ranks on "
                      "different hosts use the ucx transport (%s%s); leave netName NULL%s",
                      c->netName, haveUcx ? "built in" : "not built: ", whyNot.c_str(),
                      haveUcx ? " or name \"UCX\"" : "");
    out->netName = "UCX";
  } else {
    out->netName = base.netName;
  }

  if (c->device != TSR_CONFIG_UNDEF_INT) {
    if (c->device < TSR_DEVICE_CURRENT)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrConfig_t.device = %d: expected a CUDA device index, TSR_DEVICE_HOST (-1) "
                      "or TSR_DEVICE_CURRENT (-2)",
                      c->device);
    out->device = c->device;
  } else {
    out->device = base.device;
  }

  // Added after `device`: a caller built against an older header has no such field.
  int timeoutMs = TSR_CONFIG_UNDEF_INT;
  if (c->size >= offsetof(tsrConfig_t, timeoutMs) + sizeof(int)) timeoutMs = c->timeoutMs;
  if (timeoutMs != TSR_CONFIG_UNDEF_INT) {
    if (timeoutMs <= 0)
      return TSR_FAIL(tsrInvalidArgument,
                      "tsrConfig_t.timeoutMs = %d: a deadline must be positive (leave it "
                      "TSR_CONFIG_UNDEF_INT for TESSERA_BOOTSTRAP_TIMEOUT and "
                      "TESSERA_TRANSPORT_TIMEOUT)",
                      timeoutMs);
    out->timeoutSeconds = timeoutMs / 1000.0;
  } else {
    out->timeoutSeconds = base.timeoutSeconds;
  }
  return tsrSuccess;
}

}  // namespace tessera
