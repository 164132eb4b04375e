#include "topology/path_class.hpp"

#include <strings.h>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTopo;

constexpr const char* kNames[kNumPathClasses] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"};
}  // namespace

const char* pathClassName(PathClass c) {
  int i = static_cast<int>(c);
  return (i >= 0 && i < kNumPathClasses) ? kNames[i] : "?";
}

Result parsePathClass(const char* text, PathClass* out) {
  if (text == nullptr)
    return TSR_FAIL(tsrInvalidArgument,
                    "path class is missing; expected one of LOC, NVL, PIX, PXB, PHB, SYS, NET");
  for (int i = 0; i < kNumPathClasses; ++i) {
    if (strcasecmp(text, kNames[i]) == 0) {
      *out = static_cast<PathClass>(i);
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument,
                  "'%s' is not a path class; expected one of LOC, NVL, PIX, PXB, PHB, SYS, NET "
                  "(any case)",
                  text);
}

}  // namespace tessera
